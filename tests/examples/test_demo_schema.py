"""The README demo run against your own database keeps its tables in a schema of its own."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

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


def test_the_demo_on_a_server_it_cannot_reach_is_one_error_line() -> None:
    """in_schema let psycopg's OperationalError through: a traceback."""
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / "seven_step_workflow.py")],
        env={**os.environ, "LANGGRAPH_DURABLE_DSN": "postgresql://ana:hunter2@127.0.0.1:1/x"},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 1
    assert done.stderr.startswith("error: Could not connect to Postgres at 127.0.0.1:1/x")
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "hunter2" not in done.stderr


@pytest.fixture
def read_only_role(pg_server_dsn: str, fresh_db_dsn: str) -> Iterator[str]:
    """The DSN of a LOGIN role whose transactions are read-only; dropped afterwards."""
    name = f"lgd_ro_{secrets.token_hex(4)}"
    role = sql.Identifier(name)
    with psycopg.connect(pg_server_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE ROLE {} LOGIN").format(role))
        conn.execute(sql.SQL("ALTER ROLE {} SET default_transaction_read_only = on").format(role))
    params = {**conninfo_to_dict(fresh_db_dsn), "user": name}
    params.pop("password", None)
    try:
        yield make_conninfo("", **params)
    finally:
        with psycopg.connect(fresh_db_dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP OWNED BY {}").format(role))
        with psycopg.connect(pg_server_dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP ROLE {}").format(role))


def test_in_schema_names_a_schema_the_role_may_not_create_and_uses_one_that_exists(
    fresh_db_dsn: str, read_only_role: str
) -> None:
    with pytest.raises(ConfigurationError, match="Could not create the schema") as raised:
        in_schema(read_only_role)
    assert "read-only transaction" in str(raised.value)
    in_schema(fresh_db_dsn)  # the owner makes it once
    assert "search_path=" in in_schema(read_only_role)  # no CREATE needed any more
