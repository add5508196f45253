"""Real graphs under every durability mode, sync and async, against InMemorySaver as oracle.

Subgraphs, `Send` fan-out, interrupts with `Command(resume=...)`, `update_state` and time
travel must give exactly what LangGraph's reference saver gives.
"""

from __future__ import annotations

import operator
from typing import Annotated, Any

import pytest
from graphs import feature_graph
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.graph import START, StateGraph
from langgraph.types import Command
from typing_extensions import TypedDict

from langgraph_durable import AsyncDurablePostgresSaver, DurablePostgresSaver, with_durability
from langgraph_durable._sql import INLINE_ROWS

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


def _fan_out(width: int) -> Any:
    """`width` parallel nodes, each writing a dict (stored as a blob) to a channel of its
    own and one to a shared list: a step's put then carries `width` parked tasks' writes
    and up to `width + 1` new blobs, on both sides of `INLINE_ROWS`."""
    fields: dict[str, Any] = {f"out{i}": dict for i in range(width)}
    fields["log"] = Annotated[list, operator.add]
    State = TypedDict("State", fields, total=False)  # type: ignore[misc]
    builder = StateGraph(State)
    for i in range(width):

        def node(state: Any, i: int = i) -> dict[str, Any]:
            return {f"out{i}": {"node": i, "text": "x" * (i + 1)}, "log": [f"n{i}"]}

        builder.add_node(f"n{i}", node)
        builder.add_edge(START, f"n{i}")
    return builder


@pytest.mark.parametrize("width", [1, 2, INLINE_ROWS, INLINE_ROWS + 1, INLINE_ROWS + 3])
def test_a_few_or_many_rows_per_put_store_what_the_reference_stores(
    db_dsn: str, width: int
) -> None:
    """A put sends up to INLINE_ROWS blobs or parked writes as rows of scalar parameters and
    more as arrays: both forms store what InMemorySaver holds, and upstream's saver reads
    the same thread back the same."""
    thread = f"rows-{width}"
    config: Any = {"configurable": {"thread_id": thread}}

    def history(saver: BaseCheckpointSaver[Any]) -> list[Any]:
        graph = _fan_out(width).compile(checkpointer=saver)
        return [
            (s.values, s.next, sorted((t.name, repr(t.result)) for t in s.tasks))
            for s in graph.get_state_history(config)
        ]

    reference = InMemorySaver()
    _fan_out(width).compile(checkpointer=reference).invoke({"log": []}, config, durability="sync")
    with DurablePostgresSaver.from_conn_string(db_dsn) as saver:
        saver.setup()
        saver.delete_thread(thread)
        final = (
            _fan_out(width)
            .compile(checkpointer=saver)
            .invoke({"log": []}, config, durability="sync")
        )
        assert sorted(final["log"]) == sorted(f"n{i}" for i in range(width))
        ours = history(saver)
    with PostgresSaver.from_conn_string(db_dsn) as upstream:
        read_by_upstream = history(upstream)
    expected = history(reference)
    assert ours == expected
    assert read_by_upstream == expected


class _Raw(TypedDict, total=False):
    raw: bytearray
    log: Annotated[list[str], operator.add]


def test_a_bytearray_in_the_state_is_stored_as_langgraphs_serializer_gives_it(
    db_dsn: str,
) -> None:
    """JsonPlusSerializer hands a bytearray over as it is (not as bytes); as a blob and as a
    parked write, both in a row of scalar parameters, it comes back unchanged, for ours
    and for upstream reading the same thread."""
    builder = StateGraph(_Raw)
    builder.add_node("grow", lambda state: {"raw": state["raw"] + b"\x00\xff", "log": ["grow"]})
    builder.add_edge(START, "grow")
    config: Any = {"configurable": {"thread_id": "bytearray-state"}}
    with DurablePostgresSaver.from_conn_string(db_dsn) as saver:
        saver.setup()
        saver.delete_thread("bytearray-state")
        graph = builder.compile(checkpointer=saver)
        final = graph.invoke({"raw": bytearray(b"ab"), "log": []}, config, durability="sync")
        assert final["raw"] == bytearray(b"ab\x00\xff")
        ours = graph.get_state(config).values
    with PostgresSaver.from_conn_string(db_dsn) as upstream:
        theirs = builder.compile(checkpointer=upstream).get_state(config).values
    assert ours == theirs == {"raw": bytearray(b"ab\x00\xff"), "log": ["grow"]}
    assert isinstance(ours["raw"], bytearray)
