# WARNING: generated from _amigrate.py by tools/async_to_sync.py. DO NOT EDIT.
# Edit the async source and run `python tools/async_to_sync.py`.
"""Schema setup: idempotent, safe from many processes at once, and version-checked.

An advisory lock serialises concurrent `setup()` calls (upstream's races on its version
table). Each migration commits together with its version row; `CONCURRENTLY` index builds
cannot run in a transaction, so they run alone and their version row follows, which is safe
because every statement is `IF NOT EXISTS`. Upstream's migrations are recorded in its own
table with its numbers, so `PostgresSaver.setup()` finds nothing left to do afterwards.
"""

from __future__ import annotations

from psycopg import Connection
from psycopg.rows import DictRow

from langgraph_durable._sql import MIGRATIONS, QUERIES, Migration
from langgraph_durable.errors import SchemaNotReadyError, SchemaTooNewError

__all__ = ["DURABLE_SCHEMA_VERSION", "check_schema", "migrate"]

DURABLE_SCHEMA_VERSION = max(m.version for m in MIGRATIONS if m.series == "durable")


def _apply(conn: Connection[DictRow], migration: Migration) -> None:
    record = (
        "record_upstream_version" if migration.series == "upstream" else "record_durable_version"
    )
    params = {"v": migration.version, "name": migration.name}
    if migration.concurrently:
        conn.execute(migration.sql)
        conn.execute(QUERIES[record], params)
        return
    with conn.transaction():
        conn.execute(migration.sql)
        conn.execute(QUERIES[record], params)


def migrate(conn: Connection[DictRow]) -> list[str]:
    """Bring the schema up to date; returns the names of the migrations applied.

    `conn` must be in autocommit mode (CONCURRENTLY needs it).
    """
    applied: list[str] = []
    conn.execute(QUERIES["lock_setup"])
    try:
        # Upstream's version table is its migration 0; ours is bootstrapped the same way.
        conn.execute(MIGRATIONS[0].sql)
        conn.execute(QUERIES["create_durable_migrations_table"])
        row = (conn.execute(QUERIES["schema_versions"])).fetchone()
        assert row is not None
        if row["durable"] > DURABLE_SCHEMA_VERSION:
            raise SchemaTooNewError(
                f"This database is at langgraph-durable schema version {row['durable']}, but "
                f"this installation knows only up to {DURABLE_SCHEMA_VERSION}. Upgrade "
                "langgraph-durable; older code must not write to a newer schema."
            )
        for migration in MIGRATIONS:
            done = row["upstream"] if migration.series == "upstream" else row["durable"]
            if migration.version <= done:
                continue
            _apply(conn, migration)
            applied.append(migration.name)
    finally:
        conn.execute(QUERIES["unlock_setup"])
    return applied


def check_schema(conn: Connection[DictRow]) -> None:
    """Raise a named error unless the schema is set up and not newer than this library."""
    exists = (conn.execute(QUERIES["durable_schema_exists"])).fetchone()
    assert exists is not None
    if not exists["upstream"]:
        raise SchemaNotReadyError()
    if not exists["durable"]:
        raise SchemaNotReadyError(
            "The checkpoint tables were created by langgraph-checkpoint-postgres; call "
            "`saver.setup()` once to add langgraph-durable's indexes (it changes no data)."
        )
    row = (conn.execute(QUERIES["schema_versions"])).fetchone()
    assert row is not None
    if row["durable"] > DURABLE_SCHEMA_VERSION:
        raise SchemaTooNewError(
            f"This database is at langgraph-durable schema version {row['durable']}, but this "
            f"installation knows only up to {DURABLE_SCHEMA_VERSION}. Upgrade langgraph-durable."
        )
    if row["durable"] < DURABLE_SCHEMA_VERSION:
        raise SchemaNotReadyError(
            f"The schema is at version {row['durable']} of {DURABLE_SCHEMA_VERSION}: call "
            "`saver.setup()` to apply the missing migrations."
        )
