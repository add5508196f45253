"""What the CLI's reports say: doctor, effects, thread histories and diffs, each checked
against the rows that are really there."""

from __future__ import annotations

import json
import secrets
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from graphs import State, linear_graph
from langgraph.graph import END, START, StateGraph
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from langgraph_durable import DurablePostgresSaver, GraphVersion, RunRegistry, Worker
from langgraph_durable.cli import main


@pytest.fixture
def dsn(fresh_db_dsn: str) -> str:
    assert main(["--dsn", fresh_db_dsn, "setup"]) == 0
    return fresh_db_dsn


def cli(capsys: pytest.CaptureFixture[str], dsn: str, *argv: str) -> tuple[int, Any]:
    """Exit code and the `--json` object."""
    capsys.readouterr()
    code = main([*argv, "--json", "--dsn", dsn])
    return code, json.loads(capsys.readouterr().out)


def text(capsys: pytest.CaptureFixture[str], dsn: str, *argv: str) -> tuple[int, str]:
    capsys.readouterr()
    code = main([*argv, "--dsn", dsn])
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def test_a_running_attempt_whose_lease_lapsed_counts_as_unknown(
    capsys: pytest.CaptureFixture[str], dsn: str
) -> None:
    """A worker that died mid-attempt leaves its row `running` with a lapsed lease: its
    outcome is unknown (I3) and `resolve` takes it, but doctor counted only `unknown`
    rows and `effects list` showed it as an ordinary running attempt."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO langgraph_durable_effects (key, effect_name, input_hash, status, "
            "lease_owner, lease_expires_at) VALUES "
            "('died', 'charge', 'h', 'running', 'w1', now() - interval '1 minute'), "
            "('alive', 'charge', 'h', 'running', 'w2', now() + interval '1 hour')"
        )
    _, report = cli(capsys, dsn, "doctor")
    found = {f["check"]: f for f in report["findings"]}["unknown effects"]
    assert (found["level"], found["seen"]) == (
        "warn",
        "1 with an unknown outcome (1 running with a lapsed lease)",
    )
    code, listed = cli(capsys, dsn, "effects", "list")
    assert code == 0
    assert {r["key"]: r["lease_lapsed"] for r in listed["effects"]} == {
        "died": True,
        "alive": False,
    }
    _, shown = text(capsys, dsn, "effects", "list")
    (died,) = [line for line in shown.splitlines() if " died " in line]
    (alive,) = [line for line in shown.splitlines() if " alive " in line]
    assert died.startswith("running, lease lapsed")
    assert "lapsed" not in alive


def test_doctor_prints_the_advice_of_what_is_not_ok_whole(
    capsys: pytest.CaptureFixture[str], fresh_db_dsn: str
) -> None:
    """The advice was a table cell, cut at 60 characters."""
    code, report = cli(capsys, fresh_db_dsn, "doctor")
    (schema,) = [f for f in report["findings"] if f["check"] == "schema"]
    assert (code, schema["level"]) == (1, "fail")
    assert len(schema["advice"]) > 60
    code, out = text(capsys, fresh_db_dsn, "doctor")
    assert code == 1
    assert f"  schema (fail): {schema['advice']}" in out.splitlines()


def test_a_database_without_setup_names_the_cli_command(
    capsys: pytest.CaptureFixture[str], fresh_db_dsn: str
) -> None:
    """The CLI told its user to call `saver.setup()`, a method of a program."""
    for argv in (["doctor"], ["runs", "list"]):
        code, out = text(capsys, fresh_db_dsn, *argv)
        assert code == 1
        assert "run `langgraph-durable setup`" in out
        assert "saver.setup()" not in out
    assert out.startswith("error: ")


@pytest.fixture
def role_without_grants(pg_server_dsn: str, dsn: str) -> Iterator[str]:
    """A LOGIN role that was granted nothing; dropped after the test."""
    name = f"lgd_nogrant_{secrets.token_hex(4)}"
    with psycopg.connect(pg_server_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(name)))
    try:
        yield name
    finally:
        with psycopg.connect(pg_server_dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(name)))


def test_doctor_reports_a_role_without_grants_instead_of_stopping(
    capsys: pytest.CaptureFixture[str], dsn: str, role_without_grants: str
) -> None:
    params = {**conninfo_to_dict(dsn), "user": role_without_grants}
    params.pop("password", None)
    as_role = make_conninfo("", **params)
    capsys.readouterr()
    code = main(["doctor", "--json", "--dsn", as_role])
    captured = capsys.readouterr()
    assert (code, captured.err) == (1, "")
    found = {f["check"]: f for f in json.loads(captured.out)["findings"]}
    assert found["privileges"]["level"] == "fail"
    assert role_without_grants in found["privileges"]["seen"]
    assert f"`langgraph-durable grant {role_without_grants}`" in found["privileges"]["advice"]
    assert found["schema"]["level"] == "warn"
    assert "permission denied" in found["schema"]["advice"]


def test_doctor_names_a_schema_the_role_may_not_use(
    capsys: pytest.CaptureFixture[str], dsn: str, role_without_grants: str
) -> None:
    """Without USAGE on the tables' schema the tables are not found at all: doctor said
    the role had what an application needs, and told it to run setup."""
    schema = f"tables_{secrets.token_hex(4)}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
    in_schema = {**conninfo_to_dict(dsn), "options": f"-c search_path={schema}"}
    assert main(["--dsn", make_conninfo("", **in_schema), "setup"]) == 0
    params = {**in_schema, "user": role_without_grants}
    params.pop("password", None)
    capsys.readouterr()
    code = main(["doctor", "--json", "--dsn", make_conninfo("", **params)])
    captured = capsys.readouterr()
    try:
        assert (code, captured.err) == (1, "")
        found = {f["check"]: f for f in json.loads(captured.out)["findings"]}
        assert found["privileges"]["level"] == "fail"
        assert f"lacks USAGE on schema {schema}" in found["privileges"]["seen"]
        assert f"grant {role_without_grants} --schema {schema}" in found["privileges"]["advice"]
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))


def a_thread(dsn: str, nodes: tuple[str, ...]) -> str:
    thread = f"cli-history-{uuid.uuid4().hex[:8]}"
    with DurablePostgresSaver.from_conn_string(dsn) as saver:
        linear_graph(nodes).compile(checkpointer=saver).invoke(
            {"log": []}, {"configurable": {"thread_id": thread}}, durability="sync"
        )
    return thread


@pytest.mark.parametrize("limit", [1, 2])
def test_history_with_a_limit_shows_its_steps_as_the_whole_history_does(
    capsys: pytest.CaptureFixture[str], dsn: str, limit: int
) -> None:
    """The oldest step shown was compared with nothing: every node that ever ran and
    every channel seemed to have run and changed there."""
    thread = a_thread(dsn, ("a", "b", "c"))
    _, whole = cli(capsys, dsn, "threads", "history", thread)
    _, latest = cli(capsys, dsn, "threads", "history", thread, "--limit", str(limit))
    assert latest["steps"] == whole["steps"][-limit:]
    assert latest["steps"][-1]["nodes"] == ["c"]
    _, shown = cli(capsys, dsn, "threads", "show", thread)
    assert shown["values"] == {"log": ["a", "b", "c"]}  # the whole state, not the last change


SECRET = "pw-in-an-app-error"


def test_a_runs_stored_error_is_shown_without_its_password(
    capsys: pytest.CaptureFixture[str], dsn: str
) -> None:
    """An application's exception quoting a DSN was printed by `runs show` as stored."""

    def connect(state: dict[str, Any]) -> dict[str, Any]:
        raise ValueError(f"could not reach postgresql://app:{SECRET}@db/prod (password={SECRET})")

    builder = StateGraph(State)
    builder.add_node("connect", connect)
    builder.add_edge(START, "connect")
    builder.add_edge("connect", END)
    with DurablePostgresSaver.from_conn_string(dsn) as saver:
        version = GraphVersion(f"cli-leak-{uuid.uuid4().hex[:6]}", "1", builder.compile(saver))
        run = RunRegistry(saver).create(version, {"log": []}, max_attempts=1)
        Worker(saver, [version]).run_until_idle()
    for argv in (["runs", "show", run.run_id], ["runs", "list"], ["runs", "wait", run.run_id]):
        _, shown = cli(capsys, dsn, *argv)
        assert SECRET not in json.dumps(shown)
        _, out = text(capsys, dsn, *argv)
        assert SECRET not in out
    _, shown = cli(capsys, dsn, "runs", "show", run.run_id)
    assert shown["run"]["error_message"] == (
        "could not reach postgresql://***@db/prod (password=***)"
    )
