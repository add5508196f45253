"""Regression tests: a journaled model takes a LangChain config (callbacks, tags, the
node's config passed positionally) without changing its key, and a pool without dict rows
works."""

from __future__ import annotations

import uuid
from typing import Any

from fake_models import CountingChatModel
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt
from psycopg_pool import ConnectionPool
from typing_extensions import TypedDict

from langgraph_durable import DurablePostgresSaver, EffectJournal
from langgraph_durable.effects.llm import JournaledChatModel, token_ledger


class State(TypedDict, total=False):
    draft: str
    approved: Any


class CountingHandler(BaseCallbackHandler):
    def __init__(self) -> None:
        self.ends = 0

    def on_llm_end(self, *args: Any, **kwargs: Any) -> None:
        self.ends += 1


def run_draft_twice(db_dsn: str, builder: StateGraph[Any, Any, Any, Any]) -> dict[str, int]:
    """Run to the interrupt, resume (the node re-runs), return the thread's token ledger."""
    thread = f"issue5-{uuid.uuid4()}"
    config: Any = {"configurable": {"thread_id": thread}}
    with DurablePostgresSaver.from_conn_string(db_dsn) as saver:
        saver.setup()
        graph = builder.compile(checkpointer=saver)
        graph.invoke({}, config)
        graph.invoke(Command(resume=True), config)
        return token_ledger(saver, thread)


def one_node(node: Any) -> StateGraph[Any, Any, Any, Any]:
    builder = StateGraph(State)
    builder.add_node("draft", node)
    builder.add_edge(START, "draft")
    builder.add_edge("draft", END)
    return builder


def test_journaled_model_takes_a_config_with_callbacks(db_dsn: str) -> None:
    model = CountingChatModel(reply="Your refund is under review.")
    llm = JournaledChatModel(model)
    handler = CountingHandler()

    def draft(state: State) -> dict[str, Any]:
        config: RunnableConfig = {"callbacks": [handler], "tags": ["refunds"]}
        reply = llm.invoke([HumanMessage("Draft a note about refund 8890.")], config=config)
        return {"draft": str(reply.content), "approved": interrupt("ok?")}

    ledger = run_draft_twice(db_dsn, one_node(draft))
    assert model.calls == 1
    assert handler.ends == 1
    assert ledger["replays"] == 1


def test_journaled_model_takes_the_node_config_positionally(db_dsn: str) -> None:
    model = CountingChatModel(reply="Your refund is under review.")
    llm = JournaledChatModel(model)

    def draft(state: State, config: RunnableConfig) -> dict[str, Any]:
        reply = llm.invoke([HumanMessage("Draft a note about refund 8890.")], config)  # type: ignore[call-arg]
        return {"draft": str(reply.content), "approved": interrupt("ok?")}

    ledger = run_draft_twice(db_dsn, one_node(draft))
    assert model.calls == 1
    assert ledger["replays"] == 1


def test_journal_on_a_plain_pool_works(db_dsn: str) -> None:
    with DurablePostgresSaver.from_conn_string(db_dsn) as saver:
        saver.setup()
    with ConnectionPool(db_dsn, open=True) as pool:
        ledger = EffectJournal(pool).token_ledger("no-such-thread")  # type: ignore[arg-type]
        assert ledger["calls"] == 0
