"""The README demo run against your own database keeps its tables in a schema of its own."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

from langgraph_durable import ConfigurationError
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


def test_in_schema_matches_the_whole_search_path_option(fresh_db_dsn: str) -> None:
    """A DSN already set to a longer schema name is not mistaken for the demo's."""
    other = in_schema(fresh_db_dsn, f"{DEMO_SCHEMA}_old")
    both = in_schema(other)
    assert both != other
    with psycopg.connect(both) as conn:
        row = conn.execute("SHOW search_path").fetchone()
    assert row is not None
    assert row[0] == DEMO_SCHEMA  # the last -c wins


@pytest.mark.parametrize("schema", ["Demo", "demo schema", "1demo", "a" * 64, "d;drop"])
def test_a_schema_name_a_search_path_would_change_is_refused(schema: str) -> None:
    with pytest.raises(ConfigurationError, match="lowercase letters"):
        in_schema("postgresql://u:pw@127.0.0.1:1/x", schema)


def test_a_bad_dsn_is_named_before_connecting() -> None:
    with pytest.raises(ConfigurationError, match="port '0'") as raised:
        in_schema("host=127.0.0.1 port=0 password=hunter2")
    assert "hunter2" not in str(raised.value)
