"""Journaled model calls: a resumed node does not pay again, and the ledger says so."""

from __future__ import annotations

import uuid
from typing import Any

from fake_models import CountingChatModel
from langchain_core.messages import HumanMessage
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt
from typing_extensions import TypedDict

from langgraph_durable import DurablePostgresSaver
from langgraph_durable.effects.llm import JournaledChatModel, token_ledger


class State(TypedDict, total=False):
    draft: str
    approved: Any


def test_resumed_node_replays_the_model_call_and_counts_saved_tokens(db_dsn: str) -> None:
    model = CountingChatModel(reply="Dear customer, your refund is under review.")
    llm = JournaledChatModel(model)

    def draft(state: State) -> dict[str, Any]:
        reply = llm.invoke([HumanMessage("Write a short note about refund 8890 for Ana.")])
        approved = interrupt({"draft": reply.content})
        return {"draft": str(reply.content), "approved": approved}

    builder = StateGraph(State)
    builder.add_node("draft", draft)
    builder.add_edge(START, "draft")
    builder.add_edge("draft", END)
    thread = f"llm-{uuid.uuid4()}"
    config: Any = {"configurable": {"thread_id": thread}}
    with DurablePostgresSaver.from_conn_string(db_dsn) as saver:
        saver.setup()
        graph = builder.compile(checkpointer=saver)
        graph.invoke({}, config)
        result = graph.invoke(Command(resume=True), config)
        ledger = token_ledger(saver, thread)
    assert result["draft"] == "Dear customer, your refund is under review."
    assert model.calls == 1
    assert ledger["calls"] == 1
    assert ledger["replays"] == 1
    assert ledger["total_tokens"] > 0
    assert ledger["saved_total_tokens"] == ledger["total_tokens"]
