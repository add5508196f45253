"""Who may answer what: the graph's `authorize` hook judges approving and rejecting
apart, and the page shows each button the hook allows the signed-in user."""

from __future__ import annotations

import html
from typing import Any

from console_world import client_for, form_fields
from langgraph.graph import END, START, StateGraph
from test_console_graphs import Send
from test_console_http import answer, approval_page

from langgraph_durable import DurablePostgresSaver
from langgraph_durable.approvals import add_approval_before


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
