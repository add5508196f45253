"""The operators' reads with the async saver: the same answers as the sync ones."""

from __future__ import annotations

import operator
import uuid
from typing import Annotated, Any

import pytest
from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict

from langgraph_durable import AsyncDurablePostgresSaver, ThreadNotFoundError
from langgraph_durable.ops import adoctor, alist_threads, athread_diff, athread_history


class State(TypedDict, total=False):
    log: Annotated[list[str], operator.add]


async def test_async_thread_reads_and_doctor(db_dsn: str) -> None:
    async with AsyncDurablePostgresSaver.from_conn_string(db_dsn) as saver:
        await saver.setup()
        builder = StateGraph(State)
        builder.add_node("a", lambda s: {"log": ["a"]})
        builder.add_node("b", lambda s: {"log": ["b"]})
        builder.add_edge(START, "a")
        builder.add_edge("a", "b")
        builder.add_edge("b", END)
        graph = builder.compile(checkpointer=saver)
        thread = f"ops-{uuid.uuid4().hex[:8]}"
        config: Any = {"configurable": {"thread_id": thread}}
        await graph.ainvoke({"log": []}, config)

        (listed,) = await alist_threads(saver, prefix=thread)
        assert (listed.thread_id, listed.step, listed.checkpoints) == (thread, 2, 4)
        history = await athread_history(saver, thread)
        assert [s.nodes for s in history.steps] == [(), ("__start__",), ("a",), ("b",)]
        assert history.effects == []
        diff = await athread_diff(saver, thread)
        assert diff["changed"] == {"log": {"from": ["a"], "to": ["a", "b"]}}
        first = history.steps[1].checkpoint_id
        whole = await athread_diff(saver, thread, before=first)
        assert whole["changed"] == {"log": {"from": [], "to": ["a", "b"]}}
        with pytest.raises(ThreadNotFoundError):
            await athread_history(saver, "no-such-thread")
        with pytest.raises(ThreadNotFoundError):
            await athread_diff(saver, thread, after="no-such-checkpoint")
        findings = {f.check: f.level for f in await adoctor(saver)}
        assert findings["schema"] == "ok"
