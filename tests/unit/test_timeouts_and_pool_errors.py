"""Timeout options and pool timeouts, turned into settings and messages without a database."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import psycopg
import pytest

from langgraph_durable._db.connections import (
    SESSION_SETTINGS,
    pool_timeout_message,
    timeout_settings,
)
from langgraph_durable.errors import (
    ConfigurationError,
    DatabaseResourceError,
    LockTimeoutError,
    StatementTimeoutError,
    translate_driver_error,
)

DSN = "postgresql://app:s3cret-pw@db.example.com:6543/orders"


def test_timeouts_become_whole_milliseconds() -> None:
    assert timeout_settings(lock_timeout=None, statement_timeout=None) == {}
    assert timeout_settings(lock_timeout=0.25, statement_timeout=timedelta(seconds=2)) == {
        "lock_timeout": 250,
        "statement_timeout": 2000,
    }
    assert timeout_settings(lock_timeout=0.0001, statement_timeout=None) == {"lock_timeout": 1}


@pytest.mark.parametrize("bad", [0, -0.5, "5s", True, timedelta(seconds=-1), 10**7])
def test_impossible_timeouts_are_refused(bad: Any) -> None:
    with pytest.raises(ConfigurationError, match="statement_timeout="):
        timeout_settings(lock_timeout=None, statement_timeout=bad)


def test_session_settings_are_remembered_per_connection() -> None:
    class Conn:
        pass

    conn = Conn()
    assert not SESSION_SETTINGS.needs(conn, {})  # an unknown session holds its own
    assert SESSION_SETTINGS.needs(conn, {"lock_timeout": 100})
    SESSION_SETTINGS.record(conn, {"lock_timeout": 100})
    assert not SESSION_SETTINGS.needs(conn, {"lock_timeout": 100})
    assert SESSION_SETTINGS.needs(conn, {})  # back to the session's own
    SESSION_SETTINGS.forget(conn)  # a change cut short: the session may hold either
    assert SESSION_SETTINGS.needs(conn, {})
    assert SESSION_SETTINGS.needs(conn, {"lock_timeout": 100})
    assert SESSION_SETTINGS.params({"lock_timeout": 100}) == {
        "lock_timeout": "100",
        "statement_timeout": None,
    }


def test_a_pool_timeout_says_whether_the_server_is_down_or_the_pool_busy() -> None:
    down = pool_timeout_message(DSN, 30.0, {"pool_size": 1, "pool_available": 0}, 10)
    busy = pool_timeout_message(DSN, 2.5, {"pool_size": 4, "pool_available": 0}, 4)
    for message in (down, busy):
        assert "db.example.com:6543/orders" in message
        assert "s3cret" not in message
    assert "cannot be reached" in down
    assert "within 30 s" in down
    assert "all 4 connections of the pool were busy" in busy
    assert "pool's server" in pool_timeout_message(lambda: DSN, 1.0, {}, 1)


class FakeDiag:
    def __init__(self, message: str) -> None:
        self.message_primary = message


def test_lock_and_statement_timeouts_are_named_and_user_cancels_are_not(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def with_diag(cls: type[psycopg.Error], message: str) -> psycopg.Error:
        exc = cls(message)
        monkeypatch.setattr(type(exc), "diag", property(lambda self: FakeDiag(str(self))))
        return exc

    lock = translate_driver_error(
        with_diag(psycopg.errors.LockNotAvailable, "canceling statement due to lock timeout"),
        doing="storing a checkpoint (put)",
        timeouts={"lock_timeout": 200},
    )
    assert isinstance(lock, LockTimeoutError)
    assert "storing a checkpoint (put)" in str(lock)
    assert "lock_timeout of 200 ms" in str(lock)
    statement = translate_driver_error(
        with_diag(psycopg.errors.QueryCanceled, "canceling statement due to statement timeout")
    )
    assert isinstance(statement, StatementTimeoutError)
    assert "statement_timeout of this session" in str(statement)
    cancelled = with_diag(psycopg.errors.QueryCanceled, "canceling statement due to user request")
    assert translate_driver_error(cancelled) is None


def test_a_server_out_of_resources_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    """SQLSTATE class 53 (disk full, out of memory, too many connections, a limit such as
    temp_file_limit) reached callers as a raw psycopg error."""
    for cls, said in (
        (psycopg.errors.ConfigurationLimitExceeded, "temporary file size exceeds temp_file_limit"),
        (psycopg.errors.DiskFull, "could not extend file: No space left on device"),
    ):
        exc = cls(said)
        monkeypatch.setattr(type(exc), "diag", property(lambda self: FakeDiag(str(self))))
        named = translate_driver_error(exc, doing="storing a checkpoint (put)")
        assert isinstance(named, DatabaseResourceError)
        assert "storing a checkpoint (put)" in str(named)
        assert said in str(named)
