"""Stuck runs: flagged once past their graph's threshold, logged once, never before.

A run waiting for a person (interrupted) longer than `waiting_stuck_after` is flagged,
one within it is not, and a graph without `waiting_stuck_after` never flags its waiting
runs. Every flag is logged by the sweeping worker exactly once, however often it sweeps.
Time passes by moving `updated_at` / `last_progress_at` in the database, never by sleeping.
"""

from __future__ import annotations

import logging
import operator
import uuid
from datetime import timedelta
from typing import Annotated, Any

import psycopg
import pytest
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt
from typing_extensions import TypedDict

from langgraph_durable import DurablePostgresSaver, GraphVersion, RunRegistry, RunStatus, Worker


class State(TypedDict, total=False):
    log: Annotated[list[str], operator.add]
    answer: Any


def approval_graph(saver: DurablePostgresSaver, **options: Any) -> GraphVersion:
    builder = StateGraph(State)
    builder.add_node("ask", lambda s: {"answer": interrupt("approve?")})
    builder.add_edge(START, "ask")
    builder.add_edge("ask", END)
    return GraphVersion(
        f"stuck-{uuid.uuid4().hex[:8]}", "1", builder.compile(checkpointer=saver), **options
    )


def sql(dsn: str, statement: str, *params: Any) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(statement, params)


def waited(dsn: str, run_id: str, interval: str) -> None:
    """The run has waited for a person this long (its last change moved back)."""
    sql(
        dsn,
        "UPDATE langgraph_durable_runs SET updated_at = now() - %s::interval WHERE run_id = %s",
        interval,
        run_id,
    )


def stuck_warnings(caplog: pytest.LogCaptureFixture, run_id: str) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == "langgraph_durable.runs"
        and r.levelno == logging.WARNING
        and run_id in r.getMessage()
        and "looks stuck" in r.getMessage()
    ]


def test_a_run_waiting_too_long_for_a_person_is_flagged_and_logged_once(
    saver: DurablePostgresSaver, db_dsn: str, caplog: pytest.LogCaptureFixture
) -> None:
    runs = RunRegistry(saver)
    graph = approval_graph(saver, waiting_stuck_after=timedelta(hours=1))
    worker = Worker(saver, [graph])
    forgotten = runs.create(graph, {"log": []})
    recent = runs.create(graph, {"log": []})
    assert {r.status for r in worker.run_until_idle()} == {RunStatus.INTERRUPTED}
    waited(db_dsn, forgotten.run_id, "2 hours")
    waited(db_dsn, recent.run_id, "10 minutes")

    with caplog.at_level(logging.WARNING, logger="langgraph_durable.runs"):
        for _ in range(3):
            assert worker.run_until_idle() == []  # each call sweeps first
    flagged = [r.run_id for r in runs.stuck()]
    assert forgotten.run_id in flagged
    assert recent.run_id not in flagged
    assert runs.get(recent.run_id).stuck_since is None
    (logged,) = stuck_warnings(caplog, forgotten.run_id)
    assert "waiting for a person" in logged
    assert stuck_warnings(caplog, recent.run_id) == []

    # An answer clears the flag, and the run goes on.
    runs.resume(forgotten.run_id, Command(resume="approved"))
    assert runs.get(forgotten.run_id).stuck_since is None
    (done,) = worker.run_until_idle()
    assert (done.run_id, done.status) == (forgotten.run_id, RunStatus.SUCCESS)
    assert forgotten.run_id not in [r.run_id for r in runs.stuck()]


def test_waiting_runs_are_never_flagged_without_a_threshold(
    saver: DurablePostgresSaver, db_dsn: str, caplog: pytest.LogCaptureFixture
) -> None:
    runs = RunRegistry(saver)
    graph = approval_graph(saver)  # waiting_stuck_after=None
    worker = Worker(saver, [graph])
    run = runs.create(graph, {"log": []})
    worker.run_until_idle()
    waited(db_dsn, run.run_id, "30 days")
    with caplog.at_level(logging.WARNING, logger="langgraph_durable.runs"):
        worker.run_until_idle()
    assert runs.get(run.run_id).stuck_since is None
    assert stuck_warnings(caplog, run.run_id) == []


def test_a_running_run_without_progress_is_logged_once(
    saver: DurablePostgresSaver, db_dsn: str, caplog: pytest.LogCaptureFixture
) -> None:
    runs = RunRegistry(saver)
    graph = approval_graph(saver, stuck_after=timedelta(minutes=5))
    worker = Worker(saver, [graph])
    run = runs.create(graph, {"log": []})
    # Running on a worker elsewhere, whose last committed step was six minutes ago.
    sql(
        db_dsn,
        "UPDATE langgraph_durable_runs SET status = 'running', owner = 'elsewhere', "
        "lease_expires_at = now() + interval '1 hour', "
        "last_progress_at = now() - interval '6 minutes' WHERE run_id = %s",
        run.run_id,
    )
    with caplog.at_level(logging.WARNING, logger="langgraph_durable.runs"):
        for _ in range(3):
            assert worker.run_until_idle() == []
    (logged,) = stuck_warnings(caplog, run.run_id)
    assert "no progress" in logged
    assert runs.get(run.run_id).stuck_since is not None
