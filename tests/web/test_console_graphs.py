"""Which given graph answers a thread: the one that runs it, or none. Graphs share node
names (`add_approval_before` names every guard `approve_<target>`), so a graph that merely
has the node the thread waits at may be the wrong one: its `authorize` hook would judge
the answer and its nodes would run."""

from __future__ import annotations

import html
from collections.abc import Iterator
from typing import Any

import pytest
from console_world import client_for, csrf_of, tokens_of
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command
from starlette.testclient import TestClient
from typing_extensions import TypedDict

from langgraph_durable import DurablePostgresSaver, GraphVersion, RunRegistry, Worker
from langgraph_durable.approvals import add_approval_before, pending_approvals
from langgraph_durable.web._forms import in_form


class Send(TypedDict, total=False):
    what: str
    log: list[str]
    approval: dict[str, Any]
    approval_outcome: str


def payouts() -> StateGraph[Any]:
    """Sends money; only the CFO may approve."""
    builder: StateGraph[Any] = StateGraph(Send)
    builder.add_node("send", lambda s: {"log": ["payout sent"]})
    builder.add_edge(START, "send")
    builder.add_edge("send", END)
    add_approval_before(
        builder,
        "send",
        request=lambda s: {"payout": s["what"]},
        authorize=lambda s, d: d.approver == "cfo" or "only the CFO approves payouts",
    )
    return builder


def newsletter() -> StateGraph[Any]:
    """Sends a newsletter; anyone may approve. Its nodes have the payouts' names."""
    builder: StateGraph[Any] = StateGraph(Send)
    builder.add_node("send", lambda s: {"log": ["newsletter sent"]})
    builder.add_edge(START, "send")
    builder.add_edge("send", END)
    add_approval_before(builder, "send", request=lambda s: {"newsletter": s["what"]})
    return builder


def both(saver: Any) -> list[Any]:
    return [newsletter().compile(checkpointer=saver), payouts().compile(checkpointer=saver)]


@pytest.fixture
def intern(world: str) -> Iterator[TestClient]:
    yield from client_for(world, "intern", graphs=both)


def values(dsn: str, thread: str) -> dict[str, Any]:
    with DurablePostgresSaver.from_conn_string(dsn) as saver:
        state = (
            payouts().compile(checkpointer=saver).get_state({"configurable": {"thread_id": thread}})
        )
    return dict(state.values)


def test_a_plain_thread_that_two_given_graphs_fit_is_refused_not_guessed(
    world: str, intern: TestClient
) -> None:
    """The console once answered with the first graph that had the node: the newsletter's
    hook let the intern approve a $90,000 payout, and the newsletter's node ran."""
    thread = "payout-1"
    with DurablePostgresSaver.from_conn_string(world) as saver:
        payouts().compile(checkpointer=saver).invoke(
            {"what": "$90,000 to ACME"}, {"configurable": {"thread_id": thread}}
        )
    page = intern.get("/console/approval", params={"thread_id": thread})
    assert page.status_code == 200
    text = html.unescape(page.text)
    assert "ambiguous: the given graphs graphs[0] ('LangGraph'), graphs[1] ('LangGraph')" in text
    assert "Give the console only the graph that runs such threads" in text
    assert 'value="approve"' not in page.text
    assert "ambiguous" in intern.get("/console/").text
    fields = {
        "csrf_token": csrf_of(page.text),
        "thread": in_form(thread),
        "question": tokens_of(world, thread)[0],
        "action": "approve",
    }
    refused = intern.post("/console/approval/answer", data=fields)
    assert refused.status_code == 409, refused.text
    assert "cannot be answered from here: ambiguous" in html.unescape(refused.text)
    assert "Nothing was sent" in refused.text
    assert "approval" not in values(world, thread)
    with DurablePostgresSaver.from_conn_string(world) as saver:
        assert len(pending_approvals(saver, thread_id=thread)) == 1


def test_a_registry_run_is_judged_by_its_own_graph_or_by_none(world: str) -> None:
    """A run names its graph: a console given only other graphs with the same node names
    does not fall back to them."""
    thread = "payout-2"
    with DurablePostgresSaver.from_conn_string(world) as saver:
        version = GraphVersion("payouts", "1", payouts().compile(checkpointer=saver))
        RunRegistry(saver).create(version, {"what": "$5"}, thread_id=thread)
        Worker(saver, [version]).run_until_idle()

    def newsletter_only(saver: Any) -> list[Any]:
        return [GraphVersion("newsletter", "1", newsletter().compile(checkpointer=saver))]

    def with_payouts(saver: Any) -> list[Any]:
        return [
            *newsletter_only(saver),
            GraphVersion("payouts", "1", payouts().compile(checkpointer=saver)),
        ]

    for client in client_for(world, "intern", graphs=newsletter_only):
        text = html.unescape(client.get("/console/approval", params={"thread_id": thread}).text)
        assert "its run's graph 'payouts' (version '1') was not given to the console" in text
        assert 'value="approve"' not in text
    for client in client_for(world, "intern", graphs=with_payouts):
        text = html.unescape(client.get("/console/approval", params={"thread_id": thread}).text)
        assert "not you: only the CFO approves payouts" in text


def test_a_plain_invoke_after_a_finished_run_is_judged_by_its_nodes_alone(world: str) -> None:
    """A payouts run of the registry succeeded on the thread, then the application asked
    a newsletter question there by plain invoke: the console took the old run's name and
    judged (and ran) the newsletter's answer with the payouts graph, or the other way
    round. No run holds the question: it is a plain thread, and both graphs fit."""
    thread = "payout-3"
    with DurablePostgresSaver.from_conn_string(world) as saver:
        version = GraphVersion("payouts", "1", payouts().compile(checkpointer=saver))
        runs = RunRegistry(saver)
        run = runs.create(version, {"what": "$5"}, thread_id=thread)
        worker = Worker(saver, [version])
        worker.run_until_idle()
        runs.resume(run.run_id, Command(resume={"approved": True, "approver": "cfo"}))
        worker.run_until_idle()
        newsletter().compile(checkpointer=saver).invoke(
            {"what": "December issue"}, {"configurable": {"thread_id": thread}}
        )

    def named(saver: Any) -> list[Any]:
        return [
            GraphVersion("newsletter", "1", newsletter().compile(checkpointer=saver)),
            GraphVersion("payouts", "1", payouts().compile(checkpointer=saver)),
        ]

    for client in client_for(world, "intern", graphs=named):
        page = html.unescape(client.get("/console/approval", params={"thread_id": thread}).text)
        assert "ambiguous" in page
        assert 'value="approve"' not in page


def test_a_newer_run_cancelled_before_it_ran_does_not_hide_the_run_that_asked(
    world: str,
) -> None:
    thread = "payout-4"
    with DurablePostgresSaver.from_conn_string(world) as saver:
        version = GraphVersion("payouts", "1", payouts().compile(checkpointer=saver))
        runs = RunRegistry(saver)
        runs.create(version, {"what": "$5"}, thread_id=thread)
        Worker(saver, [version]).run_until_idle()
        newer = runs.create(version, {"what": "$6"}, thread_id=thread)
        runs.cancel(newer.run_id)

    def named(saver: Any) -> list[Any]:
        return [GraphVersion("payouts", "1", payouts().compile(checkpointer=saver))]

    for client in client_for(world, "cfo", graphs=named):
        page = html.unescape(client.get("/console/approval", params={"thread_id": thread}).text)
        assert 'value="approve"' in page, page
