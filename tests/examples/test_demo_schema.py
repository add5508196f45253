"""The README demo run against your own database keeps its tables in a schema of its own."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import psycopg

from langgraph_durable.embedded import DEMO_SCHEMA, in_schema

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def tables_by_schema(dsn: str) -> dict[str, set[str]]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT table_schema, table_name FROM information_schema.tables "
            "WHERE table_schema NOT IN ('pg_catalog', 'information_schema')"
        ).fetchall()
    found: dict[str, set[str]] = {}
    for schema, table in rows:
        found.setdefault(schema, set()).add(table)
    return found


def test_the_demo_leaves_the_rest_of_your_database_alone(fresh_db_dsn: str) -> None:
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / "seven_step_workflow.py")],
        env={**os.environ, "LANGGRAPH_DURABLE_DSN": fresh_db_dsn},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"DROP SCHEMA {DEMO_SCHEMA} CASCADE" in done.stdout
    found = tables_by_schema(fresh_db_dsn)
    assert set(found) == {DEMO_SCHEMA}  # nothing in public
    assert {"checkpoints", "langgraph_durable_effects", "seven_crm_deals"} <= found[DEMO_SCHEMA]


def test_in_schema_is_idempotent_and_keeps_other_options(fresh_db_dsn: str) -> None:
    once = in_schema(fresh_db_dsn + " options='-c statement_timeout=5000'")
    assert in_schema(once) == once
    with psycopg.connect(once) as conn:
        row = conn.execute("SHOW search_path").fetchone()
        timeout = conn.execute("SHOW statement_timeout").fetchone()
    assert row is not None
    assert row[0] == DEMO_SCHEMA
    assert timeout is not None
    assert timeout[0] == "5s"
