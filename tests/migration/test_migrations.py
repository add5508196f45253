"""Migrations against the canonical schema, in the manner of procrastinate's migration tests.

- the numbered migrations (our `setup()`), from an empty database or from upstream's
  tables, build exactly what `schema.sql` builds: tables, columns, indexes, constraints
  and the rows of both version tables;
- `setup()` is idempotent and safe when six processes run it at once;
- a schema newer than this library, a missing schema and upstream's schema alone are each
  reported by a named error that says what to do, and so is using the saver before setup.
"""

from __future__ import annotations

import asyncio
import json
import os
import queue
import re
import subprocess
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import IO, Any

import psycopg
import psycopg.errors
import pytest
from _pg import create_database, drop_database, server_has_lz4
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver, empty_checkpoint
from langgraph.checkpoint.postgres import PostgresSaver
from psycopg import sql
from psycopg.conninfo import make_conninfo
from psycopg.rows import dict_row

import langgraph_durable
from langgraph_durable import (
    AsyncDurablePostgresSaver,
    DurablePostgresSaver,
    SchemaError,
    SchemaNotReadyError,
    SchemaTooNewError,
)
from langgraph_durable._db._migrate import migrate
from langgraph_durable._sql import MIGRATIONS, SCHEMA

ALL_NAMES = [m.name for m in MIGRATIONS]
DURABLE_NAMES = [m.name for m in MIGRATIONS if m.series == "durable"]
UPSTREAM_VERSIONS = [m.version for m in MIGRATIONS if m.series == "upstream"]
DURABLE_ROWS = [(m.version, m.name) for m in MIGRATIONS if m.series == "durable"]
DURABLE_VERSION = max(v for v, _ in DURABLE_ROWS)
FROM_007 = [name for v, name in DURABLE_ROWS if v >= 7]

MakeDb = Callable[[], str]


@pytest.fixture
def make_db(pg_server_dsn: str) -> Iterator[MakeDb]:
    """Makes empty databases on demand; drops them all after the test."""
    names: list[str] = []

    def make() -> str:
        name, dsn = create_database(pg_server_dsn)
        names.append(name)
        return dsn

    try:
        yield make
    finally:
        for name in names:
            drop_database(pg_server_dsn, name)


def our_setup(dsn: str) -> list[str]:
    with DurablePostgresSaver.from_conn_string(dsn) as saver:
        return saver.setup()


def upstream_setup(dsn: str) -> None:
    with PostgresSaver.from_conn_string(dsn) as saver:
        saver.setup()


def apply_schema_sql(dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(SCHEMA)


# --- schema comparison ---------------------------------------------------------------------

_CATALOG: dict[str, str] = {
    "tables": """
        SELECT c.relname, c.relkind::text
        FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p', 'v', 'm', 'S', 'f', 'c')
    """,
    "columns": """
        SELECT c.relname, a.attnum::text, a.attname, format_type(a.atttypid, a.atttypmod),
            CASE WHEN a.attnotnull THEN 'NOT NULL' ELSE 'NULL' END,
            coalesce(pg_get_expr(d.adbin, d.adrelid), '')
        FROM pg_attribute a
        JOIN pg_class c ON c.oid = a.attrelid
        JOIN pg_namespace n ON n.oid = c.relnamespace
        LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
        WHERE n.nspname = 'public' AND c.relkind = 'r' AND a.attnum > 0
            AND NOT a.attisdropped
    """,
    "indexes": """
        SELECT ix.tablename, ix.indexname, ix.indexdef,
            CASE WHEN x.indisvalid AND x.indisready THEN 'valid' ELSE 'INVALID' END
        FROM pg_indexes ix
        JOIN pg_class i ON i.relname = ix.indexname
        JOIN pg_namespace n ON n.oid = i.relnamespace AND n.nspname = ix.schemaname
        JOIN pg_index x ON x.indexrelid = i.oid
        WHERE ix.schemaname = 'public'
    """,
    "constraints": """
        SELECT conrelid::regclass::text, conname, contype::text, pg_get_constraintdef(oid)
        FROM pg_constraint WHERE connamespace = 'public'::regnamespace
    """,
    "functions": """
        SELECT p.proname, pg_get_function_identity_arguments(p.oid)
        FROM pg_proc p WHERE p.pronamespace = 'public'::regnamespace
    """,
    "compression": """
        SELECT c.relname, a.attname, a.attcompression::text
        FROM pg_attribute a
        JOIN pg_class c ON c.oid = a.attrelid
        JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = 'public' AND c.relkind = 'r' AND a.attnum > 0
            AND NOT a.attisdropped AND a.attcompression <> ''
    """,
}

Fingerprint = dict[str, list[tuple[str, ...]]]


def _normalize(value: object) -> str:
    return re.sub(r"\s+", " ", str(value)).strip()


def fingerprint(dsn: str) -> Fingerprint:
    """Everything about the schema that must not depend on how it was built."""
    found: Fingerprint = {}
    with psycopg.connect(dsn, autocommit=True) as conn:
        for section, query in _CATALOG.items():
            if section == "compression" and conn.info.server_version < 140000:
                continue  # no per-column compression before PostgreSQL 14
            rows = conn.execute(query.encode()).fetchall()
            found[section] = sorted(tuple(_normalize(v) for v in row) for row in rows)
    return found


def version_rows(dsn: str) -> tuple[list[int], list[tuple[int, str]]]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        upstream = [r[0] for r in conn.execute("SELECT v FROM checkpoint_migrations ORDER BY v")]
        durable = [
            (int(r[0]), str(r[1]))
            for r in conn.execute("SELECT v, name FROM langgraph_durable_migrations ORDER BY v")
        ]
    return upstream, durable


OUR_COMPRESSION = {
    ("checkpoint_blobs", "blob", "l"),
    ("checkpoint_writes", "blob", "l"),
    ("checkpoints", "checkpoint", "l"),
}
"""The value columns `durable_007_lz4_values` sets to lz4 (where the server has it)."""


UPSTREAM_DROPPED = {
    "checkpoints_thread_id_idx",
    "checkpoint_blobs_thread_id_idx",
    "checkpoint_writes_thread_id_idx",
}
"""Upstream's indexes `durable_008_drop_redundant_thread_indexes` drops: each table has
another index that starts with thread_id."""


def without_ours(schema: Fingerprint) -> Fingerprint:
    """The schema minus what langgraph-durable adds to upstream's: its tables, indexes and
    functions, and the lz4 compression of the three value columns."""
    return {
        section: [
            row
            for row in rows
            if not any(v.startswith(("lgd_", "langgraph_durable")) for v in row)
            and not (section == "compression" and row in OUR_COMPRESSION)
        ]
        for section, rows in schema.items()
    }


def without_dropped(schema: Fingerprint) -> Fingerprint:
    """Upstream's schema minus the indexes our migrations drop (`UPSTREAM_DROPPED`)."""
    return {
        section: [row for row in rows if not (section == "indexes" and row[1] in UPSTREAM_DROPPED)]
        for section, rows in schema.items()
    }


def test_migrations_build_the_canonical_schema(make_db: MakeDb) -> None:
    migrated, canonical = make_db(), make_db()
    assert our_setup(migrated) == ALL_NAMES
    apply_schema_sql(canonical)

    want = fingerprint(canonical)
    assert want["tables"]  # the comparison below is not between two empty schemas
    assert fingerprint(migrated) == want
    assert version_rows(migrated) == version_rows(canonical) == (UPSTREAM_VERSIONS, DURABLE_ROWS)


def test_migrations_from_upstream_tables_build_the_canonical_schema(make_db: MakeDb) -> None:
    migrated, canonical = make_db(), make_db()
    upstream_setup(migrated)
    assert our_setup(migrated) == DURABLE_NAMES
    apply_schema_sql(canonical)

    assert fingerprint(migrated) == fingerprint(canonical)
    assert version_rows(migrated) == version_rows(canonical)


def test_upstream_migrations_are_upstream_s(make_db: MakeDb) -> None:
    """Our copies of upstream's migrations build what upstream's own `setup()` builds,
    less the three indexes ours drop, and nothing else of upstream's is missing."""
    by_upstream, by_us = make_db(), make_db()
    upstream_setup(by_upstream)
    our_setup(by_us)

    assert list(range(len(PostgresSaver.MIGRATIONS))) == UPSTREAM_VERSIONS
    ours = without_ours(fingerprint(by_us))
    assert ours["tables"]
    upstream_schema = fingerprint(by_upstream)
    assert {row[1] for row in upstream_schema["indexes"]} >= UPSTREAM_DROPPED
    assert without_dropped(upstream_schema) == ours


def _as_before_lz4(dsn: str) -> None:
    """A set-up database brought back to schema version 6 (before `durable_007`); setup()
    then applies `FROM_007`."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("DELETE FROM langgraph_durable_migrations WHERE v >= 7")
        for table, column in (
            ("checkpoints", "checkpoint"),
            ("checkpoint_blobs", "blob"),
            ("checkpoint_writes", "blob"),
        ):
            conn.execute(
                sql.SQL("ALTER TABLE {} ALTER COLUMN {} SET COMPRESSION pglz").format(
                    sql.Identifier(table), sql.Identifier(column)
                )
            )


def test_dropping_upstream_s_indexes_leaves_another_schema_s_alone(fresh_db_dsn: str) -> None:
    """`durable_008`-`010` drop upstream's thread_id indexes by name, as found on the
    search_path: where ours are gone already, a same-named index of another schema later
    on the path is not one of the checkpoint tables' and stays."""
    our_setup(fresh_db_dsn)
    with psycopg.connect(fresh_db_dsn, autocommit=True) as conn:
        conn.execute("CREATE SCHEMA other")
        for name in sorted(UPSTREAM_DROPPED):
            table = sql.Identifier("other", f"t_{name}")
            conn.execute(sql.SQL("CREATE TABLE {} (thread_id TEXT)").format(table))
            conn.execute(
                sql.SQL("CREATE INDEX {} ON {} (thread_id)").format(sql.Identifier(name), table)
            )
        conn.execute("DELETE FROM langgraph_durable_migrations WHERE v >= 8")
    on_path = make_conninfo(fresh_db_dsn, options="-c search_path=public,other")
    assert our_setup(on_path) == [name for v, name in DURABLE_ROWS if v >= 8]
    with psycopg.connect(fresh_db_dsn, autocommit=True) as conn:
        found = conn.execute(
            "SELECT schemaname, indexname FROM pg_indexes WHERE indexname = ANY(%s)",
            [sorted(UPSTREAM_DROPPED)],
        ).fetchall()
    assert sorted(found) == [("other", name) for name in sorted(UPSTREAM_DROPPED)]


def test_a_migration_waits_for_table_locks_in_short_tries(
    fresh_db_dsn: str, caplog: pytest.LogCaptureFixture
) -> None:
    """`durable_007` alters three busy tables. While a long transaction holds one of them,
    setup() must not sit in the lock queue holding the others (every reader and writer
    would queue behind it): it tries in short waits, and readers go on in between."""
    if not server_has_lz4(fresh_db_dsn):
        pytest.skip("this server has no lz4: the migration alters nothing")
    our_setup(fresh_db_dsn)
    _as_before_lz4(fresh_db_dsn)
    blocker = psycopg.connect(fresh_db_dsn)  # a transaction left open on checkpoint_blobs
    blocker.execute("SELECT count(*) FROM checkpoint_blobs").fetchone()
    caplog.set_level("INFO", logger="langgraph_durable.setup")
    applied: list[str] = []
    failed: list[BaseException] = []

    def setup() -> None:
        try:
            with psycopg.connect(fresh_db_dsn, autocommit=True, row_factory=dict_row) as conn:
                applied.extend(migrate(conn, lock_timeout=HANG_S))
        except BaseException as exc:  # reported by the test thread
            failed.append(exc)

    worker = threading.Thread(target=setup, daemon=True)
    worker.start()
    try:
        until(lambda: any("waiting for a table lock" in r.getMessage() for r in caplog.records))
        # Without the short tries this reader waits behind the migration's lock on
        # `checkpoints` until the blocker ends, and its own lock_timeout fails it.
        with psycopg.connect(fresh_db_dsn, autocommit=True) as reader:
            reader.execute("SET lock_timeout = '20s'")
            for _ in range(5):
                reader.execute("SELECT count(*) FROM checkpoints").fetchone()
        assert not applied  # still trying
        assert not failed
    finally:
        blocker.rollback()
        blocker.close()
    worker.join(HANG_S)
    assert not failed, failed
    assert applied == FROM_007
    assert version_rows(fresh_db_dsn)[1] == DURABLE_ROWS


def test_setup_gives_up_on_a_table_lock_with_a_clear_error(fresh_db_dsn: str) -> None:
    if not server_has_lz4(fresh_db_dsn):
        pytest.skip("this server has no lz4: the migration alters nothing")
    our_setup(fresh_db_dsn)
    _as_before_lz4(fresh_db_dsn)
    with psycopg.connect(fresh_db_dsn) as blocker:
        blocker.execute("SELECT count(*) FROM checkpoint_writes").fetchone()
        with (
            psycopg.connect(fresh_db_dsn, autocommit=True, row_factory=dict_row) as conn,
            pytest.raises(SchemaError, match="pg_stat_activity") as raised,
        ):
            migrate(conn, lock_timeout=0.01)
        blocker.rollback()
    assert "durable_007_lz4_values" in str(raised.value)
    assert version_rows(fresh_db_dsn)[1] == [r for r in DURABLE_ROWS if r[0] < 7]  # nothing applied
    assert our_setup(fresh_db_dsn) == FROM_007  # once the lock is free


def test_values_are_stored_lz4_compressed_and_upstream_reads_them(fresh_db_dsn: str) -> None:
    """`durable_007_lz4_values`: the checkpoint's JSON, blobs and writes compress with lz4
    (pglz cost the server more than the rest of a put), and upstream reads them back."""
    if not server_has_lz4(fresh_db_dsn):
        pytest.skip("this server has no lz4 (PostgreSQL 13, or built without it)")
    # Varied text that compresses, well past the 2 kB at which Postgres compresses a row.
    text = " ".join(f"word{i * 7919 % 1000}" for i in range(3000))
    config: RunnableConfig = {"configurable": {"thread_id": "lz4", "checkpoint_ns": ""}}
    checkpoint = empty_checkpoint()
    checkpoint["channel_values"] = {"inline": text, "blob": [text]}
    checkpoint["channel_versions"] = {"inline": "1", "blob": "1"}
    with DurablePostgresSaver.from_conn_string(fresh_db_dsn) as saver:
        saver.setup()
        stored = saver.put(config, checkpoint, {"step": 1}, {"inline": "1", "blob": "1"})
        saver.put_writes(stored, [("inline", text)], "task-1")
        saver.flush_writes()
    with psycopg.connect(fresh_db_dsn, autocommit=True) as conn:
        columns = conn.execute(
            "SELECT c.relname || '.' || a.attname, a.attcompression::text FROM pg_attribute a"
            " JOIN pg_class c ON c.oid = a.attrelid"
            " WHERE c.relname IN ('checkpoints', 'checkpoint_blobs', 'checkpoint_writes')"
            " AND a.attname IN ('checkpoint', 'blob')"
        ).fetchall()
        assert sorted(columns) == [
            ("checkpoint_blobs.blob", "l"),
            ("checkpoint_writes.blob", "l"),
            ("checkpoints.checkpoint", "l"),
        ]
        written = conn.execute(
            "SELECT (SELECT pg_column_compression(checkpoint) FROM checkpoints),"
            " (SELECT pg_column_compression(blob) FROM checkpoint_blobs),"
            " (SELECT pg_column_compression(blob) FROM checkpoint_writes)"
        ).fetchone()
        assert written == ("lz4", "lz4", "lz4")
    with PostgresSaver.from_conn_string(fresh_db_dsn) as upstream:
        found = upstream.get_tuple(config)
    assert found is not None
    assert found.checkpoint["channel_values"] == {"inline": text, "blob": [text]}
    assert found.pending_writes == [("task-1", "inline", text)]


# --- idempotence and concurrency -----------------------------------------------------------


def test_setup_is_idempotent(fresh_db_dsn: str) -> None:
    with DurablePostgresSaver.from_conn_string(fresh_db_dsn) as saver:
        assert saver.setup() == ALL_NAMES
        schema, rows = fingerprint(fresh_db_dsn), version_rows(fresh_db_dsn)
        assert saver.setup() == []
        saver.check_schema()
    assert fingerprint(fresh_db_dsn) == schema
    assert version_rows(fresh_db_dsn) == rows


async def test_async_setup_is_idempotent(fresh_db_dsn: str) -> None:
    async with AsyncDurablePostgresSaver.from_conn_string(fresh_db_dsn) as saver:
        assert await saver.setup() == ALL_NAMES
        rows = version_rows(fresh_db_dsn)
        assert await saver.setup() == []
        await saver.acheck_schema()
    assert version_rows(fresh_db_dsn) == rows


class SetupWorkers:
    """Processes running `_setup_worker.py`, each with its own interpreter and pool."""

    TIMEOUT_S = 60.0

    def __init__(self, count: int) -> None:
        package_root = str(Path(langgraph_durable.__file__).resolve().parents[1])
        pythonpath = os.pathsep.join(p for p in (package_root, os.environ.get("PYTHONPATH")) if p)
        script = str(Path(__file__).with_name("_setup_worker.py"))
        self.procs: list[subprocess.Popen[str]] = []
        self.lines: list[queue.Queue[str]] = []
        for _ in range(count):
            proc = subprocess.Popen(
                [sys.executable, script],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
                env={**os.environ, "PYTHONPATH": pythonpath},
            )
            lines: queue.Queue[str] = queue.Queue()
            assert proc.stdout is not None
            threading.Thread(target=self._pump, args=(proc.stdout, lines), daemon=True).start()
            self.procs.append(proc)
            self.lines.append(lines)

    @staticmethod
    def _pump(stream: IO[str], lines: queue.Queue[str]) -> None:
        for line in stream:
            lines.put(line)

    def _send(self, i: int, line: str) -> None:
        stdin = self.procs[i].stdin
        assert stdin is not None
        stdin.write(line + "\n")
        stdin.flush()

    def _receive(self, i: int) -> dict[str, Any]:
        try:
            line = self.lines[i].get(timeout=self.TIMEOUT_S)
        except queue.Empty:
            pytest.fail(f"setup worker {i} did not answer within {self.TIMEOUT_S}s")
        answer: dict[str, Any] = json.loads(line)
        return answer

    def race(self, dsn: str) -> list[dict[str, Any]]:
        """Every worker opens a saver on `dsn`; then all call `setup()` at the same moment.

        Half the workers use the sync saver and half the async one.
        """
        for i in range(len(self.procs)):
            flavour = "sync" if i % 2 == 0 else "async"
            self._send(i, json.dumps({"flavour": flavour, "dsn": dsn}))
        for i in range(len(self.procs)):
            assert self._receive(i) == {"ready": True}
        for i in range(len(self.procs)):
            self._send(i, "go")
        return [self._receive(i) for i in range(len(self.procs))]

    def close(self) -> None:
        # Between races a worker holds no connection, so there is nothing to shut down
        # gracefully; terminating saves the interpreters' slow exit.
        for proc in self.procs:
            proc.terminate()
        for proc in self.procs:
            proc.wait(timeout=10)
            for stream in (proc.stdin, proc.stdout):
                if stream is not None:
                    stream.close()


@pytest.fixture(scope="module", autouse=True)
def setup_workers() -> Iterator[SetupWorkers]:
    """Six worker processes, started once, with the module, so that their imports (about
    a CPU second each) overlap with the tests that come before the race."""
    workers = SetupWorkers(6)
    try:
        yield workers
    finally:
        workers.close()


class SetupDeadlocked(AssertionError):
    """A concurrent setup() failed with DeadlockDetected."""


class IndexLeftInvalid(AssertionError):
    """setup() recorded a migration whose index is INVALID."""


@pytest.mark.parametrize(
    "start",
    [
        "empty",
        "upstream_tables",
        "up_to_date",
    ],
)
def test_concurrent_setup(start: str, fresh_db_dsn: str, setup_workers: SetupWorkers) -> None:
    if start == "upstream_tables":
        upstream_setup(fresh_db_dsn)
    elif start == "up_to_date":
        our_setup(fresh_db_dsn)
    expected = {"empty": ALL_NAMES, "upstream_tables": DURABLE_NAMES, "up_to_date": []}[start]

    outcomes = setup_workers.race(fresh_db_dsn)

    errors = [o for o in outcomes if "error" in o]
    if any(e["error"] in ("DeadlockDetected", "TransactionConflictError") for e in errors):
        raise SetupDeadlocked(errors)
    assert errors == []
    applied = [name for o in outcomes for name in o["applied"]]
    assert sorted(applied) == sorted(expected)  # each migration applied exactly once
    assert version_rows(fresh_db_dsn) == (UPSTREAM_VERSIONS, DURABLE_ROWS)
    assert all(row[-1] == "valid" for row in fingerprint(fresh_db_dsn)["indexes"])


HANG_S = 60.0
"""Bounds waits that only guard against a hang; a correct run never waits it out."""


def until(condition: Callable[[], bool]) -> None:
    """Waits for another thread or session to bring about `condition` (state, not time)."""
    deadline = time.monotonic() + HANG_S
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail("condition never held")
        time.sleep(0.01)


def _wait_for_blocked_index_build(admin: psycopg.Connection[Any], dbname: str) -> int:
    deadline = time.monotonic() + HANG_S
    while time.monotonic() < deadline:
        row = admin.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = %s"
            " AND query ILIKE '%%CREATE INDEX CONCURRENTLY%%' AND wait_event_type = 'Lock'",
            [dbname],
        ).fetchone()
        if row is not None:
            return int(row[0])
        time.sleep(0.02)
    pytest.fail("CREATE INDEX CONCURRENTLY never waited for the open snapshot")


def test_setup_rebuilds_an_index_an_interrupted_setup_left_invalid(fresh_db_dsn: str) -> None:
    our_setup(fresh_db_dsn)
    index = "lgd_checkpoints_thread_id_checkpoint_id_idx"
    builds = next(m for m in MIGRATIONS if m.index == index)
    later = [m.name for m in MIGRATIONS if m.series == "durable" and m.version >= builds.version]
    with psycopg.connect(fresh_db_dsn, autocommit=True) as admin:
        admin.execute(sql.SQL("DROP INDEX {}").format(sql.Identifier(index)))
        admin.execute("DELETE FROM langgraph_durable_migrations WHERE v >= %s", [builds.version])
        dbname = admin.info.dbname
        # An open snapshot holds the index build in its last phase, where it is cancelled,
        # as a deadlock, a timeout or a killed worker would interrupt it.
        with (
            psycopg.connect(fresh_db_dsn) as holder,
            DurablePostgresSaver.from_conn_string(fresh_db_dsn) as saver,
            ThreadPoolExecutor(1) as pool,
        ):
            holder.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            holder.execute("SELECT 1")
            interrupted = pool.submit(saver.setup)
            pid = _wait_for_blocked_index_build(admin, dbname)
            admin.execute("SELECT pg_cancel_backend(%s)", [pid])
            with pytest.raises(psycopg.errors.QueryCanceled):
                interrupted.result(timeout=HANG_S)
            holder.rollback()
        state = admin.execute(
            "SELECT indisvalid FROM pg_index WHERE indexrelid = to_regclass(%s)", [index]
        ).fetchone()
        assert state == (False,)  # the interrupted build left its index behind, invalid

    assert our_setup(fresh_db_dsn) == later
    indexes = fingerprint(fresh_db_dsn)["indexes"]
    if invalid := [row for row in indexes if row[-1] != "valid"]:
        raise IndexLeftInvalid(invalid)


# --- version checks ------------------------------------------------------------------------


def _advisory_locks(dsn: str) -> int:
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'"
            " AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
        ).fetchone()
    assert row is not None
    return int(row[0])


def _from_the_future(dsn: str) -> None:
    our_setup(dsn)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO langgraph_durable_migrations (v, name) VALUES (%s, %s)",
            [DURABLE_VERSION + 1, "durable_999_from_the_future"],
        )


def test_schema_too_new(fresh_db_dsn: str) -> None:
    _from_the_future(fresh_db_dsn)
    schema, rows = fingerprint(fresh_db_dsn), version_rows(fresh_db_dsn)
    with DurablePostgresSaver.from_conn_string(fresh_db_dsn) as saver:
        with pytest.raises(SchemaTooNewError, match="Upgrade langgraph-durable"):
            saver.setup()
        with pytest.raises(SchemaTooNewError, match="Upgrade langgraph-durable"):
            saver.check_schema()
        # The failed setup() let go of its lock: another setup would not wait forever.
        assert _advisory_locks(fresh_db_dsn) == 0
    assert fingerprint(fresh_db_dsn) == schema
    assert version_rows(fresh_db_dsn) == rows


async def test_schema_too_new_async(fresh_db_dsn: str) -> None:
    _from_the_future(fresh_db_dsn)
    async with AsyncDurablePostgresSaver.from_conn_string(fresh_db_dsn) as saver:
        with pytest.raises(SchemaTooNewError):
            await saver.setup()
        with pytest.raises(SchemaTooNewError):
            await saver.acheck_schema()
        assert _advisory_locks(fresh_db_dsn) == 0


async def test_a_setup_cancelled_once_it_holds_the_lock_lets_go_of_it(
    fresh_db_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Cancelled (a timeout around `setup()`, a shutdown) just after the server granted the
    setup lock: the pooled connection must not keep it, or every other process's (and
    this one's next) `setup()` would wait for it until the lock timeout."""
    from langgraph_durable._db import _amigrate

    lock = _amigrate._alock

    async def locked_then_cancelled(conn: Any, timeout: float) -> None:
        await lock(conn, timeout)
        assert _advisory_locks(fresh_db_dsn) == 1  # held now
        raise asyncio.CancelledError

    monkeypatch.setattr(_amigrate, "_alock", locked_then_cancelled)
    async with AsyncDurablePostgresSaver.from_conn_string(fresh_db_dsn) as saver:
        with pytest.raises(asyncio.CancelledError):
            await saver.setup()
        assert _advisory_locks(fresh_db_dsn) == 0
        monkeypatch.setattr(_amigrate, "_alock", lock)
        assert await saver.setup()  # applies every migration, at once


def _tables(dsn: str) -> list[str]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        return [
            r[0] for r in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname='public'")
        ]


def test_check_schema_on_an_empty_database(fresh_db_dsn: str) -> None:
    with (
        DurablePostgresSaver.from_conn_string(fresh_db_dsn) as saver,
        pytest.raises(SchemaNotReadyError, match=re.escape("setup()")),
    ):
        saver.check_schema()
    assert _tables(fresh_db_dsn) == []  # checking created nothing


async def test_check_schema_on_an_empty_database_async(fresh_db_dsn: str) -> None:
    async with AsyncDurablePostgresSaver.from_conn_string(fresh_db_dsn) as saver:
        with pytest.raises(SchemaNotReadyError, match=re.escape("setup()")):
            await saver.acheck_schema()


def test_check_schema_on_upstream_tables_says_to_call_setup(fresh_db_dsn: str) -> None:
    upstream_setup(fresh_db_dsn)
    with DurablePostgresSaver.from_conn_string(fresh_db_dsn) as saver:
        with pytest.raises(SchemaNotReadyError) as raised:
            saver.check_schema()
        assert "setup()" in str(raised.value)
        assert saver.setup() == DURABLE_NAMES
        saver.check_schema()


def test_check_schema_on_a_partly_migrated_database(fresh_db_dsn: str) -> None:
    our_setup(fresh_db_dsn)
    with psycopg.connect(fresh_db_dsn, autocommit=True) as conn:
        conn.execute("DELETE FROM langgraph_durable_migrations WHERE v = %s", [DURABLE_VERSION])
    with DurablePostgresSaver.from_conn_string(fresh_db_dsn) as saver:
        with pytest.raises(SchemaNotReadyError, match=re.escape("setup()")):
            saver.check_schema()
        assert saver.setup() == [DURABLE_NAMES[-1]]
        saver.check_schema()


def test_runs_made_before_their_timeout_was_kept_get_it_from_their_deadline(
    fresh_db_dsn: str,
) -> None:
    """`durable_011` keeps a run's timeout (retry and resume renew the deadline from it);
    runs queued before it take it from their deadline's distance from their creation."""
    our_setup(fresh_db_dsn)
    with psycopg.connect(fresh_db_dsn, autocommit=True) as conn:  # back to version 10
        conn.execute("ALTER TABLE langgraph_durable_runs DROP COLUMN timeout_seconds")
        conn.execute("DELETE FROM langgraph_durable_migrations WHERE v >= 11")
        conn.execute(
            "INSERT INTO langgraph_durable_runs (run_id, thread_id, graph_name, graph_version,"
            " status, created_at, deadline_at) VALUES"
            " ('timed', 't', 'g', '1', 'pending', now(), now() + interval '1 hour'),"
            " ('untimed', 't', 'g', '1', 'pending', now(), NULL)"
        )
    with DurablePostgresSaver.from_conn_string(fresh_db_dsn) as saver:
        assert saver.setup() == [
            "durable_011_runs_timeout",
            "durable_012_effects_completion_event",
            "durable_013_effects_default_key",
        ]
    with psycopg.connect(fresh_db_dsn, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT run_id, timeout_seconds FROM langgraph_durable_runs ORDER BY run_id"
        ).fetchall()
    assert rows == [("timed", 3600.0), ("untimed", None)]


# --- use before setup ----------------------------------------------------------------------

THREAD: RunnableConfig = {"configurable": {"thread_id": "t-1", "checkpoint_ns": ""}}


def _checkpoint_args() -> tuple[RunnableConfig, Any, Any, Any]:
    checkpoint = empty_checkpoint()
    checkpoint["channel_values"] = {"counter": 1, "items": ["a", "b"]}
    checkpoint["channel_versions"] = {"counter": "1", "items": "1"}
    return THREAD, checkpoint, {"source": "input", "step": -1}, {"counter": "1", "items": "1"}


WRITE_TO: RunnableConfig = {
    "configurable": {"thread_id": "t-1", "checkpoint_ns": "", "checkpoint_id": "1"}
}


def _calls(saver: BaseCheckpointSaver[Any]) -> dict[str, Callable[[], object]]:
    return {
        "get_tuple": lambda: saver.get_tuple(THREAD),
        "list": lambda: list(saver.list(THREAD)),
        "put": lambda: saver.put(*_checkpoint_args()),
        "put_writes": lambda: saver.put_writes(WRITE_TO, [("items", ["c"])], "task-1"),
    }


def _acalls(saver: BaseCheckpointSaver[Any]) -> dict[str, Callable[[], Awaitable[object]]]:
    async def alist() -> object:
        return [t async for t in saver.alist(THREAD)]

    return {
        "aget_tuple": lambda: saver.aget_tuple(THREAD),
        "alist": alist,
        "aput": lambda: saver.aput(*_checkpoint_args()),
        "aput_writes": lambda: saver.aput_writes(WRITE_TO, [("items", ["c"])], "task-1"),
    }


def _check_not_ready(error: SchemaNotReadyError, call: str) -> None:
    """Named, says what to do, and keeps the driver's error as its cause."""
    assert "setup()" in str(error), call
    assert isinstance(error.__cause__, psycopg.errors.UndefinedTable), call


def test_use_before_setup(fresh_db_dsn: str) -> None:
    with DurablePostgresSaver.from_conn_string(fresh_db_dsn) as saver:
        for name, call in _calls(saver).items():
            with pytest.raises(SchemaNotReadyError) as raised:
                call()
            _check_not_ready(raised.value, name)
        # The pool's connections are still good once the schema exists.
        saver.setup()
        assert saver.get_tuple(THREAD) is None


async def test_use_before_setup_async(fresh_db_dsn: str) -> None:
    async with AsyncDurablePostgresSaver.from_conn_string(fresh_db_dsn) as saver:
        for name, call in _acalls(saver).items():
            with pytest.raises(SchemaNotReadyError) as raised:
                await call()
            _check_not_ready(raised.value, name)
        await saver.setup()
        assert await saver.aget_tuple(THREAD) is None
