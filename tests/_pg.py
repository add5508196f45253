"""Postgres helpers shared by the test fixtures, crash-test subprocesses and examples.

Server discovery order (:func:`discover_server`):

1. ``LANGGRAPH_DURABLE_TEST_DSN`` if set and reachable. If it is set but unreachable
   and ``CI=true``, :class:`ServerUnavailableError` is raised instead of falling back.
2. The probe DSN, ``LANGGRAPH_DURABLE_TEST_DSN_PROBE`` or by default
   ``postgresql://postgres@127.0.0.1:5432/postgres``, if reachable.
3. An embedded Postgres from :mod:`langgraph_durable.embedded`.

Outside pytest, import this module with the ``tests`` folder on ``sys.path``, e.g.
``PYTHONPATH=tests python -c "import _pg"``.
"""

from __future__ import annotations

import os
import secrets
import sys
from dataclasses import dataclass, field
from typing import Any

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from langgraph_durable._fencing import Fence, with_fence
from langgraph_durable.embedded import EmbeddedPostgres, start_embedded_postgres

TEST_DSN_ENV = "LANGGRAPH_DURABLE_TEST_DSN"
PROBE_DSN_ENV = "LANGGRAPH_DURABLE_TEST_DSN_PROBE"
DEFAULT_PROBE_DSN = "postgresql://postgres@127.0.0.1:5432/postgres"
CONNECT_TIMEOUT_S = 2
TEST_DB_PREFIX = "lgd_test"


class ServerUnavailableError(RuntimeError):
    """The explicitly configured test server cannot be reached under CI."""


@dataclass
class TestServer:
    """A Postgres server the tests can create databases on.

    Attributes:
        dsn: DSN of a maintenance database on the server (usually ``postgres``).
        source: Where it came from: ``"env"``, ``"probe"`` or ``"embedded"``.
        embedded: The embedded server handle when ``source == "embedded"``.
    """

    __test__ = False  # not a pytest test class despite the name

    dsn: str
    source: str
    embedded: EmbeddedPostgres | None = field(default=None, repr=False)

    def close(self) -> None:
        """Stops the embedded server, if this object started one."""
        if self.embedded is not None:
            self.embedded.stop()


def dsn_with_dbname(dsn: str, name: str) -> str:
    """Returns ``dsn`` with its database replaced by ``name``.

    Args:
        dsn: A libpq URI or ``key=value`` connection string.
        name: The database name to connect to instead.

    Returns:
        A ``key=value`` connection string with all other parameters kept.
    """
    params = conninfo_to_dict(dsn)
    params["dbname"] = name
    return make_conninfo("", **params)


def redact(dsn: str) -> str:
    """Returns ``dsn`` as a ``key=value`` string with any password masked, for messages."""
    try:
        params = conninfo_to_dict(dsn)
    except psycopg.ProgrammingError:
        return "<unparsable DSN>"
    if params.get("password"):
        params["password"] = "***"
    return make_conninfo("", **params)


def can_connect(dsn: str, timeout: int = CONNECT_TIMEOUT_S) -> bool:
    """Tells whether a connection to ``dsn`` succeeds within ``timeout`` seconds."""
    try:
        with psycopg.connect(dsn, connect_timeout=timeout, autocommit=True) as conn:
            conn.execute("SELECT 1")
    except psycopg.Error:
        return False
    return True


def _is_ci() -> bool:
    return os.environ.get("CI", "").lower() == "true"


def discover_server() -> TestServer:
    """Finds or starts a Postgres server for the tests (see the module docstring).

    Returns:
        The server; call :meth:`TestServer.close` when done with it.

    Raises:
        ServerUnavailableError: ``LANGGRAPH_DURABLE_TEST_DSN`` is set but unreachable
            while ``CI=true``.
    """
    env_dsn = os.environ.get(TEST_DSN_ENV)
    if env_dsn:
        if can_connect(env_dsn):
            return TestServer(env_dsn, "env")
        message = f"{TEST_DSN_ENV} is set but the server cannot be reached: {redact(env_dsn)}"
        if _is_ci():
            raise ServerUnavailableError(message)
        print(f"{message}; falling back", file=sys.stderr)

    probe_dsn = os.environ.get(PROBE_DSN_ENV) or DEFAULT_PROBE_DSN
    if can_connect(probe_dsn):
        return TestServer(probe_dsn, "probe")

    embedded = start_embedded_postgres()
    return TestServer(embedded.dsn, "embedded", embedded)


def unique_db_name(prefix: str = TEST_DB_PREFIX) -> str:
    """Returns a database name unique to this process, e.g. ``lgd_test_123_9f2c4a1b``."""
    return f"{prefix}_{os.getpid()}_{secrets.token_hex(4)}"


def create_database(server_dsn: str, name: str | None = None) -> tuple[str, str]:
    """Creates an empty database (from ``template0``) on the server of ``server_dsn``.

    Args:
        server_dsn: DSN of any existing database on the server.
        name: Database name; a fresh :func:`unique_db_name` when ``None``.

    Returns:
        ``(name, dsn)`` where ``dsn`` connects to the new database.
    """
    name = name or unique_db_name()
    with psycopg.connect(server_dsn, autocommit=True) as conn:
        conn.execute(
            sql.SQL("CREATE DATABASE {} TEMPLATE template0 ENCODING 'UTF8'").format(
                sql.Identifier(name)
            )
        )
    return name, dsn_with_dbname(server_dsn, name)


def drop_database(server_dsn: str, name: str) -> None:
    """Drops database ``name`` if it exists, disconnecting any sessions still on it.

    Args:
        server_dsn: DSN of another database on the same server.
        name: The database to drop.
    """
    with psycopg.connect(server_dsn, autocommit=True) as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )


def leased_config(dsn: str, thread: str, token: int) -> Any:
    """A run's config under a lease of `thread` at `token`, with the row a claim makes."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO langgraph_durable_threads (thread_id, fencing_token, owner, "
            "lease_expires_at) VALUES (%s, %s, 'test', now() + interval '1 hour')",
            (thread, token),
        )
    return with_fence({"configurable": {"thread_id": thread}}, Fence(token))


def thread_rows(dsn: str, thread_id: str) -> dict[str, int]:
    """Rows a thread has in each checkpoint table, as another session sees them."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        return {
            table: int(conn.execute(query, {"t": thread_id}).fetchone()[0])  # type: ignore[index]
            for table, query in _THREAD_ROWS.items()
        }


_THREAD_ROWS: dict[str, sql.Composable] = {
    table: sql.SQL("SELECT count(*) FROM {} WHERE thread_id = %(t)s").format(sql.Identifier(table))
    for table in ("checkpoints", "checkpoint_blobs", "checkpoint_writes")
}


def server_has_lz4(dsn: str) -> bool:
    """Whether the server can store values with lz4 (PostgreSQL 14+ built with it), which
    `durable_007_lz4_values` needs; the embedded Postgres and PostgreSQL 13 cannot."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(
            "SELECT current_setting('server_version_num')::int >= 140000 AND 'lz4' = ANY(enumvals)"
            " FROM pg_settings WHERE name = 'default_toast_compression'"
        ).fetchone()
    return bool(row and row[0])
