"""Questions of registry runs: answered only through the run, whatever its status.

The console once took any run that was not interrupted, pending or running for a plain
thread, and ran the graph itself, outside the registry: a cancelled run's approval could
be answered again and the refund made while the registry said cancelled.
"""

from __future__ import annotations

import html
from types import ModuleType

import psycopg
from console_world import client_for, csrf_of, form_fields, start_run, work
from starlette.testclient import TestClient
from test_console_http import answer, approval_page, refunds

from langgraph_durable import (
    AsyncDurablePostgresSaver,
    DurablePostgresSaver,
    GraphVersion,
    RunRegistry,
    RunStatus,
)
from langgraph_durable.web._console import Console, graphs_given


def status_of(dsn: str, run_id: str) -> RunStatus:
    with DurablePostgresSaver.from_conn_string(dsn) as saver:
        return RunRegistry(saver).get(run_id).status


def another_manager_answers(dsn: str, fields: dict[str, str]) -> str:
    """manager-ana in another browser posts the form an earlier page showed: 409's text."""
    for other in client_for(dsn, "manager-ana"):
        mine = {**fields, "csrf_token": csrf_of(other.get("/console/").text)}
        refused = answer(other, mine, action="approve")
        assert refused.status_code == 409, refused.text
        return html.unescape(refused.text)
    raise AssertionError("no client")


def test_a_cancelled_run_is_not_answered_again_and_its_retry_keeps_the_answer(
    world: str, example: ModuleType, ana: TestClient
) -> None:
    run_id, thread = start_run(world, example)
    fields = form_fields(approval_page(ana, thread))
    queued = answer(ana, fields, action="approve")
    assert queued.headers["location"] == "/console/?notice=queued"
    with DurablePostgresSaver.from_conn_string(world) as saver:
        RunRegistry(saver).cancel(run_id)  # an operator cancels it before a worker takes it
    page = html.unescape(approval_page(ana, thread))
    assert "its run is cancelled: retry the run (it resumes with the answer it was given)" in page
    assert 'value="approve"' not in page
    text = another_manager_answers(world, fields)
    assert "its run is cancelled" in text
    assert "Nothing was sent" in text
    assert refunds(world) == 0
    assert status_of(world, run_id) is RunStatus.CANCELLED
    with DurablePostgresSaver.from_conn_string(world) as saver:
        RunRegistry(saver).retry(run_id)
    work(world, example)
    assert status_of(world, run_id) is RunStatus.SUCCESS
    assert refunds(world) == 1


def test_a_blocked_run_shows_no_form_and_its_answer_is_refused_alike(
    world: str, example: ModuleType, ana: TestClient
) -> None:
    """The page and `answer` share one rule: the page once offered the buttons for a
    blocked or deferred run that `answer` then refused as answered."""
    run_id, thread = start_run(world, example)
    fields = form_fields(approval_page(ana, thread))
    assert answer(ana, fields, action="approve").status_code == 303
    with psycopg.connect(world, autocommit=True) as conn:  # e.g. no worker of its version
        conn.execute(
            "UPDATE langgraph_durable_runs SET status = 'blocked' WHERE run_id = %s", (run_id,)
        )
    page = html.unescape(approval_page(ana, thread))
    assert "answered: its run is blocked" in page
    assert 'value="approve"' not in page
    assert "answered: its run is blocked" in another_manager_answers(world, fields)
    assert refunds(world) == 0


async def test_a_run_is_answered_with_the_graph_version_it_is_pinned_to(
    world: str, example: ModuleType
) -> None:
    """Of two versions of the run's graph that both fit its thread, the run's own is used
    (its hooks judge the answer); the console once took the first that fit."""
    _, thread = start_run(world, example)
    async with AsyncDurablePostgresSaver.from_conn_string(world) as saver:
        older = GraphVersion("northwind", "0", example.build(world).compile(checkpointer=saver))
        pinned = GraphVersion("northwind", "1", example.build(world).compile(checkpointer=saver))
        console = Console(
            saver=saver,
            graphs=graphs_given([older, pinned]),
            authenticate=None,
            read_only=False,
            secret=b"s",
            may_resolve=None,
            title="t",
        )
        (run,) = await console.registry.alist(thread_id=thread)
        found = await console.graph_for(thread, run)
        assert not isinstance(found, str), found
        assert found[0] is pinned.graph


def test_a_question_a_plain_invoke_asked_after_a_successful_run_is_answered(
    world: str, example: ModuleType, ana: TestClient
) -> None:
    """The thread's registry run finished (success: it can be neither retried nor resumed);
    a plain invoke then asked a new question there. That one is a plain thread's again."""
    run_id, thread = start_run(world, example)
    assert answer(ana, form_fields(approval_page(ana, thread)), action="approve").status_code == 303
    work(world, example)
    assert status_of(world, run_id) is RunStatus.SUCCESS
    with DurablePostgresSaver.from_conn_string(world) as saver:
        graph = example.build(world).compile(checkpointer=saver)
        graph.invoke(
            {"thread": thread, "order_id": "8890", "amount": 420, "log": []},
            {"configurable": {"thread_id": thread}},
        )
    page = html.unescape(approval_page(ana, thread))
    assert 'value="approve"' in page
    answered = answer(ana, form_fields(page), action="approve")
    assert answered.status_code == 303, answered.text
    assert answered.headers["location"] == "/console/?notice=answered"
    gone = ana.get("/console/approval", params={"thread_id": thread})
    assert gone.status_code == 404  # answered: the plain invoke ran on
    assert refunds(world) == 1  # the same order: its business key replays the refund
