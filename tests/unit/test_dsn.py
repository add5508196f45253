"""DSN checks: what libpq accepts is accepted, what it refuses is named, passwords never shown."""

from __future__ import annotations

import pytest

from langgraph_durable import ConfigurationError
from langgraph_durable._db import check_dsn, describe_dsn

SECRET = "s3cr3t-pw"


@pytest.mark.parametrize(
    "dsn",
    [
        "",  # libpq fills it from PG* variables, as upstream's savers allow
        "postgresql://postgres@127.0.0.1:5432/postgres",
        "postgresql://u:pw@h1:5432,h2:5433/db",
        "host=h1,h2 port=5432, dbname=db",  # an empty port entry is libpq's default
        "host=127.0.0.1 port=65535 dbname=x",
    ],
)
def test_what_libpq_accepts_is_accepted(dsn: str) -> None:
    assert check_dsn(dsn) == dsn


@pytest.mark.parametrize(
    ("dsn", "message"),
    [
        (f"postgresql://u:{SECRET}@h:port/db", "port 'port'"),
        (f"postgresql://u:{SECRET}@h/db?sslmode", "cannot be parsed"),
        (f"host=h password={SECRET} port=0", "port '0'"),
        (f"host=h password={SECRET} port=70000", "port '70000'"),
        (f"host=h password={SECRET} port=abc", "port 'abc'"),
        (f"host=h password='{SECRET}", "cannot be parsed"),
    ],
)
def test_what_libpq_refuses_is_named_without_the_password(dsn: str, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message) as raised:
        check_dsn(dsn)
    assert SECRET not in str(raised.value)
    assert raised.value.__cause__ is None  # nothing chained that could quote the DSN


@pytest.mark.parametrize("dsn", [None, b"host=h", 5432])
def test_a_dsn_that_is_not_text_is_named(dsn: object) -> None:
    with pytest.raises(ConfigurationError, match="must be a string"):
        check_dsn(dsn)


def test_describe_names_host_port_and_database_only() -> None:
    assert describe_dsn(f"postgresql://u:{SECRET}@db.example:6432/app") == "db.example:6432/app"
    assert SECRET not in describe_dsn(f"postgresql://u:{SECRET}@h:bad/app")
    assert describe_dsn("not a dsn = = =") == "<a DSN that cannot be parsed>"
