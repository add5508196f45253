"""Schema setup: idempotent, safe from many processes at once, and version-checked.

An advisory lock serialises concurrent `setup()` calls (upstream's races on its version
table). Each migration commits together with its version row; `CONCURRENTLY` index builds
cannot run in a transaction, so they run alone and their version row follows, which is safe
because every statement is `IF NOT EXISTS`. Upstream's migrations are recorded in its own
table with its numbers, so `PostgresSaver.setup()` finds nothing left to do afterwards.
"""

from __future__ import annotations

from psycopg import AsyncConnection
from psycopg.rows import DictRow

from langgraph_durable._sql import MIGRATIONS, QUERIES, Migration
from langgraph_durable.errors import SchemaNotReadyError, SchemaTooNewError

__all__ = ["DURABLE_SCHEMA_VERSION", "acheck_schema", "amigrate"]

DURABLE_SCHEMA_VERSION = max(m.version for m in MIGRATIONS if m.series == "durable")


async def _apply(conn: AsyncConnection[DictRow], migration: Migration) -> None:
    record = (
        "record_upstream_version" if migration.series == "upstream" else "record_durable_version"
    )
    params = {"v": migration.version, "name": migration.name}
    if migration.concurrently:
        await conn.execute(migration.sql)
        await conn.execute(QUERIES[record], params)
        return
    async with conn.transaction():
        await conn.execute(migration.sql)
        await conn.execute(QUERIES[record], params)


async def amigrate(conn: AsyncConnection[DictRow]) -> list[str]:
    """Bring the schema up to date; returns the names of the migrations applied.

    `conn` must be in autocommit mode (CONCURRENTLY needs it).
    """
    applied: list[str] = []
    await conn.execute(QUERIES["lock_setup"])
    try:
        # Upstream's version table is its migration 0; ours is bootstrapped the same way.
        await conn.execute(MIGRATIONS[0].sql)
        await conn.execute(QUERIES["create_durable_migrations_table"])
        row = await (await conn.execute(QUERIES["schema_versions"])).fetchone()
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
            await _apply(conn, migration)
            applied.append(migration.name)
    finally:
        await conn.execute(QUERIES["unlock_setup"])
    return applied


async def acheck_schema(conn: AsyncConnection[DictRow]) -> None:
    """Raise a named error unless the schema is set up and not newer than this library."""
    exists = await (await conn.execute(QUERIES["durable_schema_exists"])).fetchone()
    assert exists is not None
    if not exists["upstream"]:
        raise SchemaNotReadyError()
    if not exists["durable"]:
        raise SchemaNotReadyError(
            "The checkpoint tables were created by langgraph-checkpoint-postgres; call "
            "`saver.setup()` once to add langgraph-durable's indexes (it changes no data)."
        )
    row = await (await conn.execute(QUERIES["schema_versions"])).fetchone()
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
