"""Recording how a run ended never stops the worker, whatever the run's outcome holds.

A worker that cannot write a run's outcome leaves the run `running`; the next worker takes
it, fails the same way, and after `max_attempts` the run ends as `WorkerLost` with the real
error lost. So:

- an error's text (or a reason quoting it) holding a NUL or a lone surrogate is stored
  with those characters escaped;
- an approval question that is not plain JSON is announced with its values as text;
- a finish that still fails for a reason that is not an outage records the run as `error`
  with a message saying why its outcome could not be stored, and the worker goes on.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import psycopg
import pytest
from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict

from langgraph_durable import (
    DurablePostgresSaver,
    EffectDeferred,
    GraphVersion,
    RunRegistry,
    RunStatus,
    Worker,
)
from langgraph_durable.approvals import approval_node


class State(TypedDict, total=False):
    log: list[str]
    approval: dict[str, Any]
    approval_outcome: str


def one_node(saver: DurablePostgresSaver, fn: Callable[[State], Any]) -> GraphVersion:
    builder = StateGraph(State)
    builder.add_node("only", fn)
    builder.add_edge(START, "only")
    builder.add_edge("only", END)
    return GraphVersion(f"fin-{uuid.uuid4().hex[:8]}", "1", builder.compile(checkpointer=saver))


@pytest.mark.parametrize(
    ("message", "stored"),
    [("id=abc\x00def", "id=abc\\x00def"), ("bad \ud800 byte", "bad \\ud800 byte")],
)
def test_an_error_text_postgres_refuses_is_stored_escaped(
    saver: DurablePostgresSaver, runs: RunRegistry, message: str, stored: str
) -> None:
    def node(state: State) -> State:
        raise ValueError(message)

    graph = one_node(saver, node)
    run = runs.create(graph, {"log": []}, max_attempts=1)
    (done,) = Worker(saver, [graph]).run_until_idle()  # raised DataError / UnicodeEncodeError
    assert done.run_id == run.run_id
    assert (done.status, done.attempt, done.error_type) == (RunStatus.ERROR, 1, "ValueError")
    assert done.error_message == stored


def test_a_reason_postgres_refuses_is_stored_escaped(
    saver: DurablePostgresSaver, runs: RunRegistry
) -> None:
    def node(state: State) -> State:
        raise EffectDeferred("quota of tenant a\x00b is used up")

    graph = one_node(saver, node)
    runs.create(graph, {"log": []})
    (done,) = Worker(saver, [graph]).run_until_idle()
    assert done.status is RunStatus.DEFERRED
    assert done.status_reason == "quota of tenant a\\x00b is used up"


def test_an_approval_question_that_is_not_json_is_announced_as_text(
    saver: DurablePostgresSaver, runs: RunRegistry, db_dsn: str
) -> None:
    builder = StateGraph(State)
    builder.add_node(
        "approve",
        approval_node(
            request=lambda s: {"amount": Decimal("420.00"), "order": "8890"},
            on_approve="refund",
        ),
        destinations=("refund", END),
    )
    builder.add_node("refund", lambda s: {"log": ["refunded"]})
    builder.add_edge(START, "approve")
    builder.add_edge("refund", END)
    graph = GraphVersion(f"fin-{uuid.uuid4().hex[:8]}", "1", builder.compile(checkpointer=saver))
    run = runs.create(graph, {"log": []})
    (done,) = Worker(saver, [graph], events=True).run_until_idle()  # raised InvalidEventError
    assert (done.run_id, done.status, done.attempt) == (run.run_id, RunStatus.INTERRUPTED, 0)
    with psycopg.connect(db_dsn) as conn:
        rows = conn.execute(
            "SELECT payload FROM langgraph_durable_outbox "
            "WHERE key = %s AND event_type = 'approval.requested'",
            (run.thread_id,),
        ).fetchall()
    assert [row[0]["request"] for row in rows] == [{"amount": "420.00", "order": "8890"}]


def test_a_finish_that_fails_otherwise_records_the_run_as_error_and_the_worker_goes_on(
    saver: DurablePostgresSaver,
    runs: RunRegistry,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Whatever else makes the finish fail (here a fault injected into its first call)
    ends the run as error, saying why, instead of stopping the worker."""

    def node(state: State) -> State:
        if state["log"] == ["fail"]:
            raise ValueError("row 7 is bad")
        return {"log": ["ran"]}

    graph = one_node(saver, node)
    broken = runs.create(graph, {"log": ["fail"]}, max_attempts=3)
    healthy = runs.create(graph, {"log": []})
    worker = Worker(saver, [graph])
    real_finish = worker.registry.finish
    calls: list[str] = []

    def finish_failing_once(run: Any, outcome: Any) -> bool:
        calls.append(run.run_id)
        if len(calls) == 1:
            raise RuntimeError("the disk says no")
        return real_finish(run, outcome)

    monkeypatch.setattr(worker.registry, "finish", finish_failing_once)
    with caplog.at_level("ERROR", logger="langgraph_durable.runs"):
        done = worker.run_until_idle()  # the RuntimeError escaped
    assert calls == [broken.run_id, broken.run_id, healthy.run_id]
    assert [(r.run_id, r.status, r.attempt) for r in done] == [
        (broken.run_id, RunStatus.ERROR, 1),
        (healthy.run_id, RunStatus.SUCCESS, 1),
    ]
    assert (done[0].error_type, done[0].status_reason) == ("ValueError", "outcome not stored")
    assert done[0].error_message == (
        "The run ended as pending after ValueError, but that outcome could not be stored "
        "(RuntimeError: the disk says no); it is recorded as error."
    )
    logged = [r.getMessage() for r in caplog.records]
    assert logged == [f"run {broken.run_id}: {done[0].error_message}"]
