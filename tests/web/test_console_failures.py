"""What the approver sees when something other than the console fails: the graph run on
after an answer, or the graph's `authorize` hook. A clear page, never a bare 500."""

from __future__ import annotations

import html
import logging
from types import ModuleType
from typing import Any

import pytest
from console_host import LEDGER_ERROR, Ledger, directory_builder, failing_builder
from console_world import client_for, form_fields, start_plain, tokens_of
from langgraph.graph import END, START, StateGraph
from starlette.testclient import TestClient
from test_console_http import answer, approval_page, waiting

from langgraph_durable import DurablePostgresSaver, effect
from langgraph_durable.approvals import add_approval_before, pending_approvals
from langgraph_durable.web._forms import in_form


def test_a_node_failing_after_the_answer_says_the_answer_was_recorded_and_where(
    world: str, ana: TestClient, caplog: pytest.LogCaptureFixture
) -> None:
    thread = "ledger-1"
    with DurablePostgresSaver.from_conn_string(world) as saver:
        failing_builder().compile(checkpointer=saver).invoke(
            {"item": "invoice 7"}, {"configurable": {"thread_id": thread}}
        )
    fields = form_fields(approval_page(ana, thread))
    with caplog.at_level(logging.ERROR, logger="langgraph_durable.web._answers"):
        failed = answer(ana, fields, action="approve")
    assert failed.status_code == 500
    text = html.unescape(failed.text)
    assert "Your answer was recorded, then the run failed in node post_to_ledger: " in text
    assert "RuntimeError: the ledger refused the entry" in text
    assert "s3cret-pw" not in text
    assert world not in text
    assert LEDGER_ERROR[:400] not in text  # cut to a few hundred characters
    assert f'href="/console/thread?thread_id={thread}"' in failed.text
    assert any(r.exc_info and r.exc_info[0] is RuntimeError for r in caplog.records)
    with DurablePostgresSaver.from_conn_string(world) as saver:
        assert pending_approvals(saver, thread_id=thread) == []  # the answer was taken in


def test_an_authorize_hook_that_raises_hides_one_form_not_the_inbox(
    world: str, example: ModuleType, ana: TestClient, caplog: pytest.LogCaptureFixture
) -> None:
    refund = start_plain(world, example)
    supplies = "supplies-1"
    with DurablePostgresSaver.from_conn_string(world) as saver:
        directory_builder().compile(checkpointer=saver).invoke(
            {"item": "paper"}, {"configurable": {"thread_id": supplies}}
        )
    with caplog.at_level(logging.ERROR, logger="langgraph_durable.web._answers"):
        inbox = ana.get("/console/")
    assert inbox.status_code == 200
    assert inbox.text.count("you (manager-ana) may answer") == 1  # the refund's
    assert inbox.text.count("cannot check who may answer: LookupError") == 1
    assert any(r.exc_info and r.exc_info[0] is LookupError for r in caplog.records)
    assert 'value="approve"' in approval_page(ana, refund)
    page = approval_page(ana, supplies)
    assert "cannot check who may answer: LookupError" in page
    assert 'value="approve"' not in page
    # The form posted anyway (as an earlier page showed it): a clear 500 naming the error.
    (asked,) = tokens_of(world, supplies)
    fields = {
        **form_fields(approval_page(ana, refund)),
        "thread": in_form(supplies),
        "question": asked,
    }
    failed = answer(ana, fields, action="approve")
    assert failed.status_code == 500
    text = html.unescape(failed.text)
    assert "The graph's authorize hook raised LookupError" in text
    assert "Nothing was sent" in text
    assert waiting(world, supplies) == 1


def test_an_effect_whose_outcome_is_unknown_after_the_answer_is_a_run_that_failed(
    world: str,
) -> None:
    """A node run on after the answer called an `@effect` whose receiver timed out: our
    own error (`EffectOutcomeUnknown`) was shown as a bare 409 quoting the receiver's URL
    with its secret, and the page did not say the answer was taken."""
    secret = "tok3n-s3cret"

    @effect(name="console.charge")
    def charge(item: str) -> str:
        raise TimeoutError(f"POST https://svc:{secret}@pay.example/charge timed out")

    def pay(state: Any) -> Any:
        charge(state["item"])
        return {}

    def payments() -> Any:
        builder = StateGraph(Ledger)
        builder.add_node("pay", pay)
        builder.add_edge(START, "pay")
        builder.add_edge("pay", END)
        add_approval_before(builder, "pay", request=lambda s: {"item": s["item"]})
        return builder

    thread = "pay-1"
    with DurablePostgresSaver.from_conn_string(world) as saver:
        payments().compile(checkpointer=saver).invoke(
            {"item": "invoice 9"}, {"configurable": {"thread_id": thread}}
        )
    for client in client_for(
        world, "manager-ana", graphs=lambda s: [payments().compile(checkpointer=s)]
    ):
        fields = form_fields(approval_page(client, thread))
        failed = answer(client, fields, action="approve")
        text = html.unescape(failed.text)
        assert "Your answer was recorded, then the run failed in node pay" in text
        assert "EffectOutcomeUnknown" in text
        assert secret not in text
        timeline = html.unescape(client.get("/console/thread", params={"thread_id": thread}).text)
        assert "__error__" in timeline
        assert secret not in timeline  # the node's error, as LangGraph stored it
    with DurablePostgresSaver.from_conn_string(world) as saver:
        assert pending_approvals(saver, thread_id=thread) == []  # the answer was taken in
