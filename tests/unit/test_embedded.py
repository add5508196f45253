"""The embedded Postgres starts in a temporary folder, answers queries and stops cleanly."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from langgraph_durable.embedded import DSN_ENV_VAR, resolve_dsn, start_embedded_postgres


@pytest.fixture
def private_tmp() -> Iterator[Path]:
    # Not pytest's tmp_path: as root, pgserver opens up the parents of its data dir.
    path = Path(tempfile.mkdtemp(prefix="langgraph-durable-pg-test-"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def test_resolve_dsn_starts_embedded_select_1_and_stop(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(DSN_ENV_VAR, raising=False)
    dsn, pg = resolve_dsn()
    assert pg is not None
    try:
        assert dsn == pg.dsn
        assert pg.data_dir.parent.name.startswith("langgraph-durable-pg-")
        with psycopg.connect(dsn) as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)
    finally:
        pg.stop()
    assert not pg.running
    assert not pg.data_dir.parent.exists()  # the temporary folder is removed
    with pytest.raises(psycopg.OperationalError):
        psycopg.connect(dsn, connect_timeout=2).close()
    pg.stop()  # idempotent


def test_explicit_data_dir_is_kept_and_reusable(private_tmp: Path) -> None:
    data_dir = private_tmp / "nested" / "pgdata"
    with start_embedded_postgres(data_dir) as pg, psycopg.connect(pg.dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE kept (x int)")
    assert (data_dir / "PG_VERSION").exists()

    with start_embedded_postgres(str(data_dir)) as pg, psycopg.connect(pg.dsn) as conn:
        assert conn.execute("SELECT to_regclass('kept') IS NOT NULL").fetchone() == (True,)


def test_resolve_dsn_prefers_explicit_then_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(DSN_ENV_VAR, "postgresql://from-env/db")
    assert resolve_dsn("postgresql://explicit/db") == ("postgresql://explicit/db", None)
    assert resolve_dsn() == ("postgresql://from-env/db", None)
