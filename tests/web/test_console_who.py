"""Who may answer what: the graph's `authorize` hook judges approving and rejecting
apart, and the page shows each button the hook allows the signed-in user."""

from __future__ import annotations

import html
from typing import Any

from console_world import client_for, csrf_of, form_fields, tokens_of
from langgraph.graph import END, START, StateGraph
from test_console_graphs import Send
from test_console_http import answer, approval_page

from langgraph_durable import DurablePostgresSaver
from langgraph_durable.approvals import ApprovalDecision, add_approval_before, approval_node
from langgraph_durable.web._forms import in_form


def payouts() -> StateGraph[Any]:
    """The README's pattern: anyone may reject, only the CFO may approve."""
    builder: StateGraph[Any] = StateGraph(Send)
    builder.add_node("send", lambda s: {"log": ["sent"]})
    builder.add_node("tell_no", lambda s: {"log": ["rejected"]})
    builder.add_edge(START, "send")
    builder.add_edge("send", END)
    builder.add_edge("tell_no", END)
    add_approval_before(
        builder,
        "send",
        request=lambda s: {"what": s["what"]},
        on_reject="tell_no",
        authorize=lambda s, d: not d.approved or d.approver == "cfo" or "only the CFO approves",
    )
    return builder


def graphs(saver: Any) -> list[Any]:
    return [payouts().compile(checkpointer=saver)]


def outcome(dsn: str, thread: str) -> Any:
    with DurablePostgresSaver.from_conn_string(dsn) as saver:
        state = (
            payouts().compile(checkpointer=saver).get_state({"configurable": {"thread_id": thread}})
        )
    return state.values.get("approval_outcome")


def test_a_user_the_hook_lets_reject_but_not_approve_is_shown_reject_only(world: str) -> None:
    """The page once asked the hook about approving alone: the clerk saw no form at all,
    while a reject posted by hand was taken."""
    thread = "payout-1"
    with DurablePostgresSaver.from_conn_string(world) as saver:
        payouts().compile(checkpointer=saver).invoke(
            {"what": "$90,000"}, {"configurable": {"thread_id": thread}}
        )
    for clerk in client_for(world, "clerk", graphs=graphs):
        page = approval_page(clerk, thread)
        assert "you (clerk) may reject;" in page
        assert "not approve: only the CFO approves" in html.unescape(page)
        assert 'value="reject"' in page
        assert 'value="approve"' not in page
        assert 'value="amend"' not in page
        fields = form_fields(page)
        refused = answer(clerk, fields, action="approve")
        assert refused.status_code == 403
        assert outcome(world, thread) is None
        done = answer(clerk, fields, action="reject", comment="not this quarter")
        assert done.headers["location"] == "/console/?notice=answered", done.text
    assert outcome(world, thread) == "rejected"
    with DurablePostgresSaver.from_conn_string(world) as saver:
        payouts().compile(checkpointer=saver).invoke(
            {"what": "$5"}, {"configurable": {"thread_id": "payout-2"}}
        )
    for cfo in client_for(world, "cfo", graphs=graphs):
        page = approval_page(cfo, "payout-2")
        assert "you (cfo) may answer" in page
        assert all(f'value="{a}"' in page for a in ("approve", "amend", "reject"))


class ViaConsole(ApprovalDecision):
    """A decision model with a field of its own, which the console's form need not send."""

    channel: str = "console"


class Ticketed(ApprovalDecision):
    """A decision model with a required field the console's form cannot fill."""

    ticket: str


def modelled(model: type[ApprovalDecision], authorize: Any = None) -> StateGraph[Any]:
    builder: StateGraph[Any] = StateGraph(Send)
    builder.add_node("send", lambda s: {"log": ["sent"]})
    builder.add_edge(START, "send")
    builder.add_edge("send", END)
    add_approval_before(
        builder,
        "send",
        request=lambda s: {"what": s["what"]},
        authorize=authorize,
        decision_model=model,
    )
    return builder


def via_console_only(state: Any, d: ViaConsole) -> bool | str:
    """Reads the model's own field, as the README's decision_model allows."""
    return (d.channel == "console" and d.approver == "cfo") or f"{d.approver} via {d.channel}"


def test_the_page_judges_who_may_answer_with_the_nodes_decision_model(world: str) -> None:
    """The page once tried a plain ApprovalDecision on the hook: reading `d.channel` raised
    AttributeError, the page said "cannot check who may answer" and hid the buttons, while
    an answer posted by hand was judged with the node's model and accepted."""
    builder = modelled(ViaConsole, authorize=via_console_only)
    with DurablePostgresSaver.from_conn_string(world) as saver:
        builder.compile(checkpointer=saver).invoke(
            {"what": "$5"}, {"configurable": {"thread_id": "model-1"}}
        )

    def given(saver: Any) -> list[Any]:
        return [builder.compile(checkpointer=saver)]

    for clerk in client_for(world, "clerk", graphs=given):
        page = html.unescape(approval_page(clerk, "model-1"))
        assert "not you: clerk via console" in page
        assert 'value="approve"' not in page
    for cfo in client_for(world, "cfo", graphs=given):
        page = approval_page(cfo, "model-1")
        assert "you (cfo) may answer" in page, html.unescape(page)[-800:]
        done = answer(cfo, form_fields(page), action="approve")
        assert done.headers["location"] == "/console/?notice=answered", done.text
    with DurablePostgresSaver.from_conn_string(world) as saver:
        state = builder.compile(checkpointer=saver).get_state(
            {"configurable": {"thread_id": "model-1"}}
        )
    assert state.values["approval_outcome"] == "approved"
    assert state.values["approval"]["channel"] == "console"


def test_a_decision_model_the_form_cannot_fill_is_named_and_shows_no_buttons(
    world: str,
) -> None:
    """A model with a required field the form does not send: the page showed buttons that
    each ended in a 400. It says to answer from code instead."""
    builder = modelled(Ticketed)
    with DurablePostgresSaver.from_conn_string(world) as saver:
        builder.compile(checkpointer=saver).invoke(
            {"what": "$5"}, {"configurable": {"thread_id": "model-2"}}
        )

    def given(saver: Any) -> list[Any]:
        return [builder.compile(checkpointer=saver)]

    for cfo in client_for(world, "cfo", graphs=given):
        page = html.unescape(approval_page(cfo, "model-2"))
        assert (
            "nobody here: its decision model Ticketed needs 'ticket', which this page does "
            "not send; answer it from code (resume_approval)" in page
        )
        assert 'name="question"' not in page
        refused = answer(
            cfo,
            {
                "csrf_token": csrf_of(page),
                "thread": in_form("model-2"),
                "question": tokens_of(world, "model-2")[0],
            },
            action="approve",
        )
        assert refused.status_code == 400
        assert "ticket: Field required" in html.unescape(refused.text)


def reviewed_inside() -> StateGraph[Any]:
    """An approval node inside a subgraph, whose authorize hook lets only the CFO answer."""
    inner: StateGraph[Any] = StateGraph(Send)
    inner.add_node(
        "ask",
        approval_node(
            lambda s: {"what": s["what"]},
            on_approve="send",
            authorize=lambda s, d: d.approver == "cfo" or f"{d.approver} may not approve",
        ),
        destinations=("send",),
    )
    inner.add_node("send", lambda s: {"log": ["sent"]})
    inner.add_edge(START, "ask")
    inner.add_edge("send", END)
    outer: StateGraph[Any] = StateGraph(Send)
    outer.add_node("review", inner.compile())
    outer.add_edge(START, "review")
    outer.add_edge("review", END)
    return outer


def test_a_question_asked_inside_a_subgraph_says_who_may_answer_is_unchecked(
    world: str,
) -> None:
    """The subgraph's hooks are not in the given graph's builder: the page once told the
    clerk "you (clerk) may answer", sent the answer, and the node refused it."""
    builder = reviewed_inside()
    with DurablePostgresSaver.from_conn_string(world) as saver:
        builder.compile(checkpointer=saver).invoke(
            {"what": "$5"}, {"configurable": {"thread_id": "inside-1"}}
        )

    def given(saver: Any) -> list[Any]:
        return [builder.compile(checkpointer=saver)]

    for clerk in client_for(world, "clerk", graphs=given):
        for page in (approval_page(clerk, "inside-1"), clerk.get("/console/").text):
            assert "who may answer cannot be checked here" in page
            assert "you (clerk) may" not in page
        # The form stays: the node itself judges, and asks again with its reason.
        done = answer(clerk, form_fields(approval_page(clerk, "inside-1")), action="approve")
        assert "notice=asked_again" in done.headers["location"], done.text
        assert "clerk may not approve" in html.unescape(approval_page(clerk, "inside-1"))
    for cfo in client_for(world, "cfo", graphs=given):
        done = answer(cfo, form_fields(approval_page(cfo, "inside-1")), action="approve")
        assert done.headers["location"] == "/console/?notice=answered", done.text
