"""Run and approval events: stored in the outbox with the change they announce.

A registry and a worker made with `events=` store, in the transaction of a run's finish,
resume or sweep: run.completed, run.failed, run.interrupted with approval.requested (the
question, so a manager can be told what to approve), approval.answered, run.stuck. A
relay then publishes them in order per thread. Without `events=` nothing is stored.
"""

from __future__ import annotations

import operator
import uuid
from typing import Annotated, Any

import psycopg
import pytest
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command
from typing_extensions import TypedDict

from langgraph_durable import (
    RUN_EVENTS,
    ConfigurationError,
    DurablePostgresSaver,
    GraphVersion,
    RunRegistry,
    Worker,
)
from langgraph_durable.approvals import approval_node
from langgraph_durable.outbox import OutboxRelay
from langgraph_durable.outbox.publishers import CallbackPublisher


class State(TypedDict, total=False):
    log: Annotated[list[str], operator.add]
    order_id: str
    approval: dict[str, Any]
    approval_outcome: str


def refund_graph(saver: DurablePostgresSaver) -> GraphVersion:
    builder = StateGraph(State)
    builder.add_node(
        "approve",
        approval_node(
            request=lambda s: {"order": s["order_id"], "amount": 420},
            on_approve="refund",
            on_reject=END,
        ),
    )
    builder.add_node("refund", lambda s: {"log": ["refunded"]})
    builder.add_edge(START, "approve")
    builder.add_edge("refund", END)
    return GraphVersion(f"ev-{uuid.uuid4().hex[:6]}", "1", builder.compile(checkpointer=saver))


def failing_graph(saver: DurablePostgresSaver) -> GraphVersion:
    def fail(state: State) -> State:
        raise ValueError("down")

    builder = StateGraph(State)
    builder.add_node("fail", fail)
    builder.add_edge(START, "fail")
    builder.add_edge("fail", END)
    return GraphVersion(f"evf-{uuid.uuid4().hex[:6]}", "1", builder.compile(checkpointer=saver))


def outbox(dsn: str, thread_id: str) -> list[tuple[str, dict[str, Any]]]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT event_type, payload FROM langgraph_durable_outbox WHERE key = %s ORDER BY seq",
            (thread_id,),
        ).fetchall()
    return [(kind, payload) for kind, payload in rows]


async def test_runs_announce_what_happened_through_the_outbox(
    db_dsn: str, saver: DurablePostgresSaver
) -> None:
    graph = refund_graph(saver)
    runs = RunRegistry(saver, events=True)
    worker = Worker(saver, [graph], events=True)
    run = runs.create(graph, {"order_id": "8890"})
    worker.run_until_idle()
    asked = outbox(db_dsn, run.thread_id)
    assert [kind for kind, _ in asked] == ["run.interrupted", "approval.requested"]
    assert asked[1][1]["request"] == {"order": "8890", "amount": 420}
    assert asked[1][1]["run_id"] == run.run_id

    runs.resume(run.run_id, Command(resume={"approved": True, "approver": "dana"}))
    worker.run_until_idle()
    kinds = [kind for kind, _ in outbox(db_dsn, run.thread_id)]
    assert kinds == ["run.interrupted", "approval.requested", "approval.answered", "run.completed"]
    answered = outbox(db_dsn, run.thread_id)[2][1]
    assert (answered["approved"], answered["approver"]) == (True, "dana")

    failing = failing_graph(saver)
    failed = runs.create(failing, {}, max_attempts=1)
    Worker(saver, [failing], events=["run.failed"]).run_until_idle()
    assert outbox(db_dsn, failed.thread_id) == [
        (
            "run.failed",
            {
                "run_id": failed.run_id,
                "thread_id": failed.thread_id,
                "graph": failing.name,
                "version": "1",
                "attempt": 1,
                "status": "error",
                "error_type": "ValueError",
            },
        )
    ]

    published: list[tuple[str, str]] = []
    relay = OutboxRelay(
        db_dsn, CallbackPublisher(lambda e: published.append((e.key, e.event_type)))
    )
    try:
        while (await relay.run_once()).claimed:
            pass
    finally:
        await relay.aclose()
    assert [kind for key, kind in published if key == run.thread_id] == kinds  # in order
    assert (failed.thread_id, "run.failed") in published


def test_without_events_nothing_is_stored_and_unknown_types_are_named(
    db_dsn: str, saver: DurablePostgresSaver
) -> None:
    failing = failing_graph(saver)
    runs = RunRegistry(saver)
    run = runs.create(failing, {}, max_attempts=1)
    Worker(saver, [failing]).run_until_idle()
    assert outbox(db_dsn, run.thread_id) == []
    with pytest.raises(ConfigurationError, match=r"run\.finished"):
        RunRegistry(saver, events=["run.finished"])
    assert "approval.requested" in RUN_EVENTS
