"""Real graphs under every durability mode, sync and async, against InMemorySaver as oracle.

Subgraphs, `Send` fan-out, interrupts with `Command(resume=...)`, `update_state` and time
travel must give exactly what LangGraph's reference saver gives.
"""

from __future__ import annotations

from typing import Any

import pytest
from graphs import feature_graph
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from langgraph_durable import AsyncDurablePostgresSaver, DurablePostgresSaver, with_durability

MODES = ["sync", "async", "exit"]


def _scenario(saver: BaseCheckpointSaver[Any], mode: str, thread: str) -> dict[str, Any]:
    graph = feature_graph().compile(checkpointer=saver)
    config: Any = {"configurable": {"thread_id": thread}}
    first = graph.invoke({"items": [1, 2, 3]}, config, durability=mode)  # type: ignore[arg-type]
    waiting = graph.get_state(config)
    resumed = list(graph.stream(Command(resume="yes"), config, durability=mode))  # type: ignore[arg-type]
    graph.update_state(config, {"log": ["manual"]})
    history = list(graph.get_state_history(config))
    # Time travel: replay from the checkpoint that was waiting for approval.
    fork = next(s for s in history if s.next == ("approve",))
    replay = graph.invoke(Command(resume="again"), fork.config, durability=mode)  # type: ignore[arg-type]
    return {
        "interrupt": [i.value for i in first["__interrupt__"]],
        "waiting_next": waiting.next,
        "resumed_chunks": len(resumed),
        "final": graph.get_state(config).values,
        "history_len": len(history) if mode != "exit" else None,
        "replay": replay,
    }


async def _ascenario(saver: BaseCheckpointSaver[Any], mode: str, thread: str) -> dict[str, Any]:
    graph = feature_graph().compile(checkpointer=saver)
    config: Any = {"configurable": {"thread_id": thread}}
    first = await graph.ainvoke({"items": [1, 2, 3]}, config, durability=mode)  # type: ignore[arg-type]
    waiting = await graph.aget_state(config)
    resumed = [c async for c in graph.astream(Command(resume="yes"), config, durability=mode)]  # type: ignore[arg-type]
    await graph.aupdate_state(config, {"log": ["manual"]})
    history = [s async for s in graph.aget_state_history(config)]
    fork = next(s for s in history if s.next == ("approve",))
    replay = await graph.ainvoke(Command(resume="again"), fork.config, durability=mode)  # type: ignore[arg-type]
    return {
        "interrupt": [i.value for i in first["__interrupt__"]],
        "waiting_next": waiting.next,
        "resumed_chunks": len(resumed),
        "final": (await graph.aget_state(config)).values,
        "history_len": len(history) if mode != "exit" else None,
        "replay": replay,
    }


@pytest.mark.parametrize("mode", MODES)
def test_sync_saver_matches_reference(db_dsn: str, mode: str) -> None:
    expected = _scenario(InMemorySaver(), mode, "t")
    with DurablePostgresSaver.from_conn_string(db_dsn) as saver:
        saver.setup()
        got = _scenario(saver, mode, f"graphs-sync-{mode}")
    assert got == expected
    assert sorted(got["final"]["doubled"]) == [2, 4, 6]
    assert got["final"]["log"].count("finish") == 1


@pytest.mark.parametrize("mode", MODES)
async def test_async_saver_matches_reference(db_dsn: str, mode: str) -> None:
    expected = await _ascenario(InMemorySaver(), mode, "t")
    async with AsyncDurablePostgresSaver.from_conn_string(db_dsn) as saver:
        await saver.setup()
        got = await _ascenario(saver, mode, f"graphs-async-{mode}")
    assert got == expected


def test_with_durability_reaches_subgraphs(db_dsn: str) -> None:
    """A default bound with `with_durability` is what the subgraph's saves see too."""
    seen: list[str] = []

    class Spy(DurablePostgresSaver):
        def put(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
            seen.append(
                f"{config['configurable'].get('checkpoint_ns', '').split(':')[0]}="
                f"{config['configurable'].get('__pregel_durability')}"
            )
            return super().put(config, checkpoint, metadata, new_versions)

    with Spy.from_conn_string(db_dsn) as saver:
        saver.setup()
        graph = with_durability(feature_graph().compile(checkpointer=saver), "sync")
        graph.invoke({"items": [1]}, {"configurable": {"thread_id": "bound-durability"}})
    assert seen
    assert all(s.endswith("=sync") for s in seen), seen
