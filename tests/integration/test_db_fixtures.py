"""Smoke tests for the database fixtures in ``tests/conftest.py``."""

from __future__ import annotations

import psycopg

_USER_TABLES = (
    "SELECT count(*) FROM pg_catalog.pg_tables"
    " WHERE schemaname NOT IN ('pg_catalog', 'information_schema')"
)


def test_db_dsn_connects(db_dsn: str) -> None:
    with psycopg.connect(db_dsn) as conn:
        row = conn.execute("SELECT current_database(), 1").fetchone()
    assert row is not None
    assert row[0].startswith("lgd_test_")
    assert row[1] == 1


def test_fresh_db_is_separate_and_empty(db_dsn: str, fresh_db_dsn: str) -> None:
    with psycopg.connect(db_dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS fixture_marker (id int)")
        shared = conn.execute("SELECT current_database()").fetchone()

    with psycopg.connect(fresh_db_dsn) as conn:
        fresh = conn.execute("SELECT current_database()").fetchone()
        tables = conn.execute(_USER_TABLES).fetchone()

    assert shared is not None
    assert fresh is not None
    assert fresh[0] != shared[0]
    assert fresh[0].startswith("lgd_test_")
    assert tables == (0,)
