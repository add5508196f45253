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


@pytest.mark.parametrize(
    "text",
    [
        "Authorization: Bearer sk-live-4f9",
        "{'authorization': 'Bearer eyJhbGciOi.4f9'}",
        "{'user': 'app', 'password': 'sk-live-4f9'}",
        "password: sk-live-4f9",
        "Pwd=sk-live-4f9;",
        "api_key=sk-live-4f9 and more",
        r"password='it\'s sk-live-4f9' dbname=x",
        "a stored text cut short: postgresql://app:sk-live-4f9",
    ],
)
def test_other_shapes_of_secrets_are_hidden(text: str) -> None:
    """Found by review: bearer credentials, dict reprs, `password:`, `Pwd=`, API keys,
    escaped quotes, and a URL whose `@` a cut left out."""
    assert "4f9" not in redact_passwords(text)


def test_a_page_hides_secrets_before_it_cuts_the_text() -> None:
    """A long error with a DSN straddling the length a page shows: cut first, the URL no
    longer had its `@` and was shown whole, password included."""
    from langgraph_durable.web._views import redacted

    text = "x" * 3970 + " postgresql://app:s3cret-pw@db.internal/books and so on"
    assert "s3cret-pw" not in redacted(text)
    assert "s3cret-pw" not in redacted(text[:3998])


def test_prose_that_names_a_secret_is_left_as_written() -> None:
    """Found by review: the CLI's own advice lost its instruction ("a signing secret: ***
    LANGGRAPH_DURABLE_WEBHOOK_SECRET")."""
    advice = "A webhook needs a signing secret: set LANGGRAPH_DURABLE_WEBHOOK_SECRET to it."
    assert redact_passwords(advice) == advice
    assert redact_passwords("token=abc123 expired") == "token=*** expired"


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("Stripe(secret_key='sk_live_4f9')", "Stripe(secret_key=***)"),
        ("SECRET_KEY=django-insecure-4f9 loaded", "SECRET_KEY=*** loaded"),
        ("private_key=-----BEGIN-4f9", "private_key=***"),
        ("aws_secret_access_key=4f9", "aws_secret_access_key=***"),
        ('clientSecret="4f9"', "clientSecret=***"),
        ("X-Api-Key: 4f9", "X-Api-Key: ***"),
        ("X-Auth-Token: 4f9", "X-Auth-Token: ***"),
        ("access_token: 4f9", "access_token: ***"),
        ("Authorization: Token 4f9", "Authorization: Token ***"),
        ("{'Authorization': 'Token 4f9'}", "{'Authorization': 'Token ***'}"),
        ("Authorization: 4f9", "Authorization: ***"),
        ("Authorization: Bearer 4f9", "Authorization: Bearer ***"),
        ("postgresql://app:pa/ss4f9@db/prod", "postgresql://***@db/prod"),
        ("postgresql://app:pa#ss4f9@db/prod", "postgresql://***@db/prod"),
        ("postgresql://app:pa?ss4f9@db/prod", "postgresql://***@db/prod"),
        ("postgresql://app:p@ss4f9@db/prod", "postgresql://***@db/prod"),
        ("redis://:pa/ss4f9@cache:6379/0", "redis://***@cache:6379/0"),
        ("https://u:4f9@host/p?mail=a@b.example", "https://***@host/p?mail=a@b.example"),
    ],
)
def test_secrets_under_longer_names_headers_and_odd_url_passwords_are_hidden(
    text: str, shown: str
) -> None:
    """Found by review: a name holding a secret word (`secret_key`, `SECRET_KEY`), a
    header (`X-Api-Key:`, `Authorization: Token`), and a URL password holding `/`, `?`,
    `#` or `@`, of which part was shown (`postgresql://app:pa/…`)."""
    assert redact_passwords(text) == shown
    assert "4f9" not in redact_passwords(text)


@pytest.mark.parametrize(
    "text",
    [
        "max_tokens=4096 is above the model's limit",
        "prompt_tokens=12, completion_tokens=40",
        "tokenizer=gpt2",
        "Token expired; the secret: set it again",
        "authorization failed for bob",
        "https://host:8080/path?mail=a@b.example",
        "https://host/path?mail=a@b.example",
    ],
)
def test_ordinary_text_near_secret_words_is_left_as_written(text: str) -> None:
    """Names that hold a secret word as a plural or a longer word (token counts a model
    reports), prose, and a URL with a port and an `@` in its query are not secrets."""
    assert redact_passwords(text) == text
