"""Add langgraph-durable to a graph you already have: a checkpointer and one `@effect`.

    python examples/add_to_existing_graph.py          # embedded Postgres, nothing to set up
    LANGGRAPH_DURABLE_DSN=postgresql://... python examples/add_to_existing_graph.py

`before()` is a small support graph as many people write it: triage a question, open a
helpdesk ticket, tell the team. Telling the team fails once (a network blip), so LangGraph
retries the node, and the retry opens a second ticket. `after()` is the same graph with the
checkpointer and an `@effect` added; `diff()` prints what changed (under 20 lines). The
retry now replays the journaled call: one ticket. Exit code 0 means both claims held.
"""

from __future__ import annotations

import difflib
import inspect
import sys
import uuid
from typing import Any

from langgraph.graph import END, START, StateGraph
from langgraph.types import RetryPolicy
from typing_extensions import TypedDict

from langgraph_durable import DurablePostgresSaver, effect
from langgraph_durable.embedded import demo_database, demo_note


class Ticket(TypedDict, total=False):
    question: str
    team: str
    ticket_id: int


class Helpdesk:
    """The outside world: every `open` is a new ticket; the chat fails on its first message."""

    def __init__(self) -> None:
        self.tickets: list[str] = []
        self.messages: list[str] = []
        self._chat_failures_left = 1

    def open(self, summary: str) -> int:
        self.tickets.append(summary)
        return len(self.tickets)

    def tell(self, team: str, text: str) -> None:
        if self._chat_failures_left:
            self._chat_failures_left -= 1
            raise ConnectionError("chat service unreachable")
        self.messages.append(f"{team}: {text}")


RETRY = RetryPolicy(max_attempts=3, initial_interval=0.01, retry_on=ConnectionError)


def before(question: str, helpdesk: Helpdesk) -> dict[str, Any]:
    """The graph as it was: no persistence, a side effect in a retried node."""

    def triage(state: Ticket) -> Ticket:
        return {"team": "billing" if "invoice" in state["question"] else "support"}

    def open_and_tell(state: Ticket) -> Ticket:
        ticket_id = helpdesk.open(state["question"])
        helpdesk.tell(state["team"], f"ticket {ticket_id}: {state['question']}")
        return {"ticket_id": ticket_id}

    builder = StateGraph(Ticket)
    builder.add_node("triage", triage)
    builder.add_node("open_and_tell", open_and_tell, retry_policy=RETRY)
    builder.add_edge(START, "triage")
    builder.add_edge("triage", "open_and_tell")
    builder.add_edge("open_and_tell", END)
    graph = builder.compile()
    return graph.invoke({"question": question})


def after(question: str, helpdesk: Helpdesk, dsn: str, thread_id: str) -> dict[str, Any]:
    """The same graph on Postgres, with the ticket as an idempotent effect."""

    @effect(name="helpdesk.open")
    def open_ticket(summary: str) -> int:
        return helpdesk.open(summary)

    def triage(state: Ticket) -> Ticket:
        return {"team": "billing" if "invoice" in state["question"] else "support"}

    def open_and_tell(state: Ticket) -> Ticket:
        ticket_id = open_ticket(state["question"])
        helpdesk.tell(state["team"], f"ticket {ticket_id}: {state['question']}")
        return {"ticket_id": ticket_id}

    builder = StateGraph(Ticket)
    builder.add_node("triage", triage)
    builder.add_node("open_and_tell", open_and_tell, retry_policy=RETRY)
    builder.add_edge(START, "triage")
    builder.add_edge("triage", "open_and_tell")
    builder.add_edge("open_and_tell", END)
    with DurablePostgresSaver.from_conn_string(dsn) as saver:
        saver.setup()  # once per database; idempotent
        graph = builder.compile(checkpointer=saver)
        config: Any = {"configurable": {"thread_id": thread_id}}
        return graph.invoke({"question": question}, config, durability="sync")


def diff() -> list[str]:
    """The lines removed (-) and added (+) from `before` to `after`, docstrings included."""
    old, new = (inspect.getsource(f).splitlines() for f in (before, after))
    return [
        line
        for line in difflib.unified_diff(old, new, lineterm="", n=0)
        if line[:1] in "+-" and not line.startswith(("+++", "---"))
    ]


def main() -> int:
    question = "The invoice for March is wrong"
    old_desk = Helpdesk()
    old = before(question, old_desk)
    print(f"before: ticket {old['ticket_id']}; the helpdesk has {len(old_desk.tickets)} tickets")
    changed = diff()
    print(f"\n{len(changed)} changed lines:")
    print("\n".join(changed))
    dsn, embedded = demo_database()
    print(demo_note(embedded))
    try:
        new_desk = Helpdesk()
        new = after(question, new_desk, dsn, f"ticket-{uuid.uuid4().hex[:8]}")
    finally:
        if embedded is not None:
            embedded.stop()
    print(f"\nafter: ticket {new['ticket_id']}; the helpdesk has {len(new_desk.tickets)} tickets")
    ok = len(old_desk.tickets) == 2 and len(new_desk.tickets) == 1 and len(changed) < 20
    ok = ok and new_desk.messages == [f"billing: ticket 1: {question}"]
    print(
        "the retried node opened one ticket with the effect (two without):",
        "yes" if ok else "NO",
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
