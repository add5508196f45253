"""What both connection flavours share: DSN checks, connection settings, disconnects.

Pure: nothing here opens a connection. A DSN is checked before any connection is tried,
so a malformed one fails with a named error, and every description of a DSN (in errors,
logs, CLI output) is made here, never showing a password.
"""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict
from psycopg.rows import dict_row

from langgraph_durable.errors import ConfigurationError

__all__ = [
    "CONNECTION_KWARGS",
    "check_dsn",
    "check_row_factory",
    "describe_dsn",
    "is_disconnect",
    "single_connection_lost",
]

CONNECTION_KWARGS: dict[str, Any] = {
    "autocommit": True,
    # Prepared at first use: planning the tuple query costs more than running it.
    "prepare_threshold": 0,
    "row_factory": dict_row,
}


def describe_dsn(dsn: str) -> str:
    """host:port/dbname of a DSN, for messages: never the password, never the raw text."""
    try:
        info = conninfo_to_dict(dsn)
    except psycopg.ProgrammingError:
        return "<a DSN that cannot be parsed>"
    host = info.get("host") or "localhost (socket)"
    port = info.get("port") or "5432"
    return f"{host}:{port}/{info.get('dbname') or info.get('user') or ''}"


def check_dsn(dsn: object) -> str:
    """The DSN, if libpq can parse it and its ports are valid; else `ConfigurationError`.

    An empty DSN is valid, as for libpq and upstream: the `PG*` environment variables
    and libpq's defaults fill it in. psycopg's own parse errors quote the DSN, password
    included: they are replaced here by a message that names the problem only.
    """
    if not isinstance(dsn, str):
        raise ConfigurationError(
            f"The database DSN must be a string, got {type(dsn).__name__}: pass a libpq DSN "
            "such as 'postgresql://user@host:5432/dbname' (or set LANGGRAPH_DURABLE_DSN)."
        )
    try:
        info = conninfo_to_dict(dsn)
    except psycopg.ProgrammingError:
        raise ConfigurationError(
            "The database DSN cannot be parsed (the text is not repeated here, as it may "
            "hold a password). Use 'postgresql://user:password@host:5432/dbname' or "
            "'host=... port=... dbname=... user=...'."
        ) from None
    for port in str(info.get("port") or "5432").split(","):
        port = port.strip() or "5432"  # libpq: an empty entry means the default
        if not (port.isdigit() and 1 <= int(port) <= 65535):
            raise ConfigurationError(
                f"The database DSN names port {port!r}; a port is a number from 1 to 65535. "
                f"Fix the DSN ({describe_dsn(dsn)})."
            )
    return dsn


def single_connection_lost(conn: Any) -> str:
    """The message for a call on a saver whose one connection has died."""
    info = conn.info
    where = f"{info.host}:{info.port}/{info.dbname}"
    return (
        f"The connection to Postgres at {where} that this saver was made with is closed (a "
        "server restart, a network cut or an idle timeout). A single connection cannot be "
        "reopened: make the saver with from_conn_string() or on a psycopg ConnectionPool to "
        "ride out restarts, or make a new saver on a new connection."
    )


def check_row_factory(conn: Any) -> None:
    """Rows must come back as dicts, as for upstream's savers."""
    if conn.row_factory is not dict_row:
        raise ConfigurationError(
            "The connection (or the pool's connections) must return rows as dicts: create "
            "it with row_factory=dict_row (and autocommit=True), as for PostgresSaver."
        )


def is_disconnect(exc: BaseException) -> bool:
    """Whether an error means the connection died (server restart, idle kill, network)."""
    if not isinstance(exc, psycopg.OperationalError):
        return False
    state = exc.sqlstate
    # No SQLSTATE: the socket failed. 08xxx: connection exceptions. 57P0x: the server
    # terminated the session (shutdown, restart, pg_terminate_backend).
    return state is None or state.startswith(("08", "57P"))
