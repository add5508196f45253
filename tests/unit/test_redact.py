"""Passwords never reach what people see, whichever way an error quotes them."""

from __future__ import annotations

import pytest

from langgraph_durable._redact import redact_passwords


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        (
            "boom postgresql://u:SecretInErr@h/db failed",
            "boom postgresql://***@h/db failed",
        ),
        ("could not connect: host=h password=hunter2 port=5", "host=h password=*** port=5"),
        ("password='two words' dbname=x", "password=*** dbname=x"),
        ('{"password": "pw1", "user": "u"}', '{"password": ***, "user": "u"}'),
        ("PGPASSWORD=pw2 psql", "PGPASSWORD=*** psql"),
        ("amqp://guest:guest@rabbit:5672/", "amqp://***@rabbit:5672/"),
    ],
)
def test_passwords_are_hidden_and_the_rest_kept(text: str, shown: str) -> None:
    assert shown in redact_passwords(text)
    for secret in ("SecretInErr", "hunter2", "two words", "pw1", "pw2", "guest:guest"):
        assert secret not in redact_passwords(text)


def test_text_without_a_password_is_unchanged() -> None:
    text = "ValueError: the payment service is down (see https://status.example/api)"
    assert redact_passwords(text) == text
