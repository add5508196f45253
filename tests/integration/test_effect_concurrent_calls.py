"""Calls of one default-keyed effect made at once from several threads or asyncio tasks of
one node (a `ToolNode` running a model message's tool calls): their ordinals, so their
keys, follow arrival order, which a resume may change. That is warned about; keyed by
the tool call's id, it is not, and each call acts once."""

from __future__ import annotations

import asyncio
import threading
import uuid
import warnings
from typing import Annotated, Any

import pytest
from langchain_core.messages import AIMessage
from langchain_core.tools import InjectedToolCallId, tool
from langgraph.config import get_config
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode

from langgraph_durable import (
    AsyncDurablePostgresSaver,
    DurablePostgresSaver,
    EffectKeyWarning,
    effect,
)


def two_calls(state: MessagesState) -> dict[str, Any]:
    calls = [{"name": "notify", "args": {"to": to}, "id": f"call-{to}"} for to in ("alice", "bob")]
    return {"messages": [AIMessage("", tool_calls=calls)]}


def graph_with(tools: list[Any], saver: Any) -> Any:
    builder = StateGraph(MessagesState)
    builder.add_node("model", two_calls)
    builder.add_node("tools", ToolNode(tools))
    builder.add_edge(START, "model")
    builder.add_edge("model", "tools")
    builder.add_edge("tools", END)
    return builder.compile(checkpointer=saver)


def test_parallel_tool_calls_with_default_keys_are_warned_about(
    saver: DurablePostgresSaver,
) -> None:
    both_in = threading.Barrier(2, timeout=60)  # the two calls overlap, in two threads
    sent: list[str] = []

    @tool
    @effect(name="tests.notify_default")
    def notify(to: str) -> str:
        """Send a mail."""
        both_in.wait()
        sent.append(to)
        return f"sent {to}"

    graph = graph_with([notify], saver)
    with pytest.warns(EffectKeyWarning, match="tool call's id"):
        graph.invoke({"messages": []}, {"configurable": {"thread_id": str(uuid.uuid4())}})
    assert sorted(sent) == ["alice", "bob"]


async def test_parallel_async_tool_calls_with_default_keys_are_warned_about(
    db_dsn: str,
) -> None:
    sent: list[str] = []

    @tool
    @effect(name="tests.anotify_default")
    async def notify(to: str) -> str:
        """Send a mail."""
        await asyncio.sleep(0)
        sent.append(to)
        return f"sent {to}"

    async with AsyncDurablePostgresSaver.from_conn_string(db_dsn) as saver:
        await saver.setup()
        graph = graph_with([notify], saver)
        with pytest.warns(EffectKeyWarning):
            await graph.ainvoke(
                {"messages": []}, {"configurable": {"thread_id": str(uuid.uuid4())}}
            )
    assert sorted(sent) == ["alice", "bob"]


def test_tool_calls_keyed_by_their_ids_act_once_each_without_a_warning(
    saver: DurablePostgresSaver,
) -> None:
    both_in = threading.Barrier(2, timeout=60)
    sent: list[str] = []

    @tool
    @effect(
        key=lambda to, tool_call_id: (
            f"mail:{get_config()['configurable']['thread_id']}:{tool_call_id}"
        )
    )
    def notify(to: str, tool_call_id: Annotated[str, InjectedToolCallId]) -> str:
        """Send a mail."""
        both_in.wait()
        sent.append(to)
        return f"sent {to}"

    graph = graph_with([notify], saver)
    config: Any = {"configurable": {"thread_id": str(uuid.uuid4())}}
    with warnings.catch_warnings():
        warnings.simplefilter("error", EffectKeyWarning)
        graph.invoke({"messages": []}, config)
    # The tools node again, from the checkpoint before it: replayed from the journal.
    before_tools = next(s for s in graph.get_state_history(config) if s.next == ("tools",))
    both_in.reset()
    graph.invoke(None, before_tools.config)
    assert sorted(sent) == ["alice", "bob"]
