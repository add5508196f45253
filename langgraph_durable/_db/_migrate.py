# WARNING: generated from _amigrate.py by tools/async_to_sync.py. DO NOT EDIT.
# Edit the async source and run `python tools/async_to_sync.py`.
"""Schema setup: idempotent, safe from many processes at once, and version-checked.

Generated from the async source; edit that file, not this one.

An advisory lock serialises concurrent `setup()` calls (upstream's races on its version
table); it is tried in a loop rather than waited for in the server, because a waiting
session holds a snapshot that the lock holder's `CREATE INDEX CONCURRENTLY` would wait for.
Each migration commits together with its version row; `CONCURRENTLY` index builds cannot
run in a transaction, so they run alone and their version row follows, which is safe because
every statement is `IF NOT EXISTS`; an index left invalid by an interrupted build is dropped
and built again. A migration in a transaction waits for table locks in short tries
(`LOCK_WAIT_MS`): one that alters a busy table (`ALTER TABLE` takes an ACCESS EXCLUSIVE
lock) would otherwise queue behind a long transaction while every reader and writer of the
table queued behind it. Upstream's migrations are recorded in its own table with its numbers, so
`PostgresSaver.setup()` finds nothing left to do afterwards.
"""

from __future__ import annotations

import contextlib
import logging
import time

import psycopg.errors
from psycopg import Connection, sql
from psycopg.rows import DictRow

from langgraph_durable._db.schema import (
    DURABLE_SCHEMA_VERSION,
    LOCK_WAIT_MS,
    UPSTREAM_SCHEMA_VERSION,
    check_versions,
    not_ready_upstream_only,
    too_new,
)
from langgraph_durable._sql import MIGRATIONS, QUERIES, Migration
from langgraph_durable.errors import SchemaError, SchemaNotReadyError

__all__ = ["check_schema", "migrate"]

logger = logging.getLogger("langgraph_durable.setup")


def _lock(conn: Connection[DictRow], timeout: float) -> None:
    """Take the setup lock, polling with backoff; give up after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    delay = 0.01
    while True:
        row = (conn.execute(QUERIES["try_lock_setup"])).fetchone()
        if row is not None and row["locked"]:
            return
        if time.monotonic() > deadline:
            raise SchemaError(
                f"Another process has held the setup lock for more than {timeout:.0f}s. If "
                "no setup() is running, look for a stuck session in pg_stat_activity."
            )
        time.sleep(delay)
        delay = min(delay * 2, 0.2)


def _apply_migration(conn: Connection[DictRow], migration: Migration, deadline: float) -> None:
    record = (
        "record_upstream_version" if migration.series == "upstream" else "record_durable_version"
    )
    params = {"v": migration.version, "name": migration.name}
    if migration.concurrently:
        if migration.index is not None:
            found = (
                conn.execute(QUERIES["index_is_invalid"], {"name": migration.index})
            ).fetchone()
            if found is not None and found["invalid"]:
                logger.warning(
                    "rebuilding index %s left invalid by an earlier setup", migration.index
                )
                drop = sql.SQL(QUERIES["drop_index_concurrently"]).format(
                    index=sql.Identifier(migration.index)
                )
                conn.execute(drop)
        if migration.drops is not None and not _one_of_ours(conn, migration.drops):
            logger.info("no index %s on the checkpoint tables: nothing to drop", migration.drops)
        else:
            conn.execute(migration.sql, prepare=False)
        conn.execute(QUERIES[record], params)
        return
    tries, pause = 0, 0.05
    while True:
        tries += 1
        try:
            with conn.transaction():
                conn.execute(QUERIES["migration_lock_wait"], {"ms": LOCK_WAIT_MS})
                conn.execute(migration.sql, prepare=False)
                conn.execute(QUERIES[record], params)
            return
        except psycopg.errors.LockNotAvailable as exc:
            if time.monotonic() >= deadline:
                raise SchemaError(
                    f"setup() could not apply migration {migration.name}: another session "
                    f"kept a lock on a table it changes for the whole wait ({tries} tries, "
                    f"each holding up that table's other sessions at most {LOCK_WAIT_MS} "
                    "ms). Look in pg_stat_activity for a long or 'idle in transaction' "
                    "session, end it, and call setup() again; nothing of this migration "
                    "was applied."
                ) from exc
            logger.info(
                "migration %s is waiting for a table lock another session holds (try %d)",
                migration.name,
                tries,
            )
            time.sleep(pause)
            pause = min(2 * pause, 2.0)


def _one_of_ours(conn: Connection[DictRow], index: str) -> bool:
    """Whether `index`, as DROP INDEX would find it, is an index of a checkpoint table."""
    found = (conn.execute(QUERIES["index_of_checkpoint_tables"], {"name": index})).fetchone()
    return bool(found and found["ours"])


def migrate(conn: Connection[DictRow], *, lock_timeout: float = 300) -> list[str]:
    """Bring the schema up to date; returns the names of the migrations applied.

    `conn` must be in autocommit mode (CONCURRENTLY needs it). `lock_timeout`: seconds to
    wait for the setup lock, and then for the table locks of each migration.
    """
    try:
        if _up_to_date(conn):
            return []
        return _migrate_locked(conn, lock_timeout)
    except psycopg.errors.InsufficientPrivilege as exc:
        raise SchemaNotReadyError(
            "The schema needs migrations, and this database role may not change it: run "
            "`setup()` (or `langgraph-durable setup`) once as the owner of the tables, then "
            "use this role (server said: "
            f"{exc.diag.message_primary})."
        ) from exc


def _up_to_date(conn: Connection[DictRow]) -> bool:
    """Whether every migration is recorded, read without creating anything, so that a role
    that may not create tables (see `roles.py`) can call `setup()` on a current schema."""
    exists = (conn.execute(QUERIES["durable_schema_exists"])).fetchone()
    if exists is None or not (exists["upstream"] and exists["durable"]):
        return False
    row = (conn.execute(QUERIES["schema_versions"])).fetchone()
    assert row is not None
    if row["durable"] > DURABLE_SCHEMA_VERSION:
        raise too_new(row["durable"])
    return bool(
        row["durable"] == DURABLE_SCHEMA_VERSION and row["upstream"] >= UPSTREAM_SCHEMA_VERSION
    )


def _unlock(conn: Connection[DictRow]) -> None:
    """Release the setup lock; if that fails (the connection cut short mid-statement by a
    cancel), close the session, which releases it: a pooled connection must not go on
    holding it, or every other process's `setup()` waits for it until its timeout."""
    try:
        conn.execute(QUERIES["unlock_setup"])
    except BaseException:
        conn.close()
        raise


def _migrate_locked(conn: Connection[DictRow], lock_timeout: float) -> list[str]:
    applied: list[str] = []
    try:
        _lock(conn, lock_timeout)
    except SchemaError:
        raise  # never taken
    except BaseException:  # interrupted, perhaps after the server granted the lock
        with contextlib.suppress(Exception):
            _unlock(conn)  # not held: the server only warns
        raise
    try:
        # Upstream's version table is its migration 0; ours is bootstrapped the same way.
        conn.execute(MIGRATIONS[0].sql)
        conn.execute(QUERIES["create_durable_migrations_table"])
        row = (conn.execute(QUERIES["schema_versions"])).fetchone()
        assert row is not None
        if row["durable"] > DURABLE_SCHEMA_VERSION:
            raise too_new(row["durable"])
        for migration in MIGRATIONS:
            done = row["upstream"] if migration.series == "upstream" else row["durable"]
            if migration.version <= done:
                continue
            _apply_migration(conn, migration, time.monotonic() + lock_timeout)
            applied.append(migration.name)
    finally:
        _unlock(conn)
    return applied


def check_schema(conn: Connection[DictRow]) -> None:
    """Raise a named error unless the schema is set up and not newer than this library."""
    exists = (conn.execute(QUERIES["durable_schema_exists"])).fetchone()
    assert exists is not None
    if not exists["upstream"]:
        raise SchemaNotReadyError()
    if not exists["durable"]:
        raise not_ready_upstream_only()
    row = (conn.execute(QUERIES["schema_versions"])).fetchone()
    assert row is not None
    check_versions(row["durable"])
