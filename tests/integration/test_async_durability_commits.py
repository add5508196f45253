"""Under `durability="async"` a checkpoint that more steps follow commits without waiting
for its WAL flush, and something synchronous always commits after it before the run
returns: the run's last checkpoint, or the writes of a step that ended in an interrupt.

What the savers send is recorded by a cursor on their pool's connections: each checkpoint
statement's `synchronous_commit` parameter (every other statement commits under the
session's default, on), in the order the statements returned, that is, committed.
"""

from __future__ import annotations

import asyncio
import operator
import threading
import uuid
from collections.abc import Iterator
from typing import Annotated, Any

import psycopg
import pytest
from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt
from psycopg.abc import Params, Query
from psycopg.rows import DictRow
from psycopg_pool import AsyncConnectionPool, ConnectionPool
from typing_extensions import Self, TypedDict

from langgraph_durable import AsyncDurablePostgresSaver, DurablePostgresSaver
from langgraph_durable._db import CONNECTION_KWARGS

WAIT_FOR_A_WRITE_S = 1.0
"""How long the blocked checkpoint waits for a write to commit before it: a write that
waits for it (as it should) never comes, so the test pays this once per flavour."""


class Committed:
    """What the savers committed, in order: ("put", mode, step) for checkpoint statements,
    ("writes", "on", None) for task writes stored on their own (reads are left out). With
    `block_step`, the put of that step's checkpoint first waits (at most
    `WAIT_FOR_A_WRITE_S`) for task writes to commit, and sets `node_may_go`."""

    def __init__(self, block_step: int | None = None) -> None:
        self.seen: list[tuple[str, str, int | None]] = []
        self.block_step = block_step
        self.node_may_go = threading.Event()
        self.writes_committed = threading.Event()

    def holds_back(self, params: Any) -> bool:
        """Whether this statement is the put to hold back."""
        return (
            isinstance(params, dict)
            and "synchronous_commit" in params
            and self.block_step is not None
            and _step(params) == self.block_step
        )

    def committed(self, query: Query, params: Any) -> None:
        if isinstance(params, dict) and "synchronous_commit" in params:
            self.seen.append(("put", params["synchronous_commit"], _step(params)))
        elif b"INSERT INTO checkpoint_writes" in _text(query):
            self.seen.append(("writes", "on", None))
            if self.node_may_go.is_set():
                self.writes_committed.set()

    def puts(self) -> list[tuple[str, int | None]]:
        return [(mode, step) for kind, mode, step in self.seen if kind == "put"]


def _text(query: Query) -> bytes:
    return query.encode() if isinstance(query, str) else bytes(query)  # type: ignore[arg-type]


def _step(params: dict[str, Any]) -> int | None:
    metadata = params.get("metadata")
    text = metadata if isinstance(metadata, str) else getattr(metadata, "obj", None)
    if isinstance(text, dict):
        return int(text["step"])
    if isinstance(text, str):
        import json

        return int(json.loads(text)["step"])
    return None


COMMITTED = Committed()


class RecordingCursor(psycopg.Cursor[DictRow]):
    def execute(self, query: Query, params: Params | None = None, **kwargs: Any) -> Self:
        recorder = COMMITTED
        if recorder.holds_back(params):
            recorder.node_may_go.set()
            recorder.writes_committed.wait(WAIT_FOR_A_WRITE_S)
        result = super().execute(query, params, **kwargs)
        recorder.committed(query, params)
        return result


class AsyncRecordingCursor(psycopg.AsyncCursor[DictRow]):
    async def execute(self, query: Query, params: Params | None = None, **kwargs: Any) -> Self:
        recorder = COMMITTED
        if recorder.holds_back(params):
            recorder.node_may_go.set()
            await asyncio.to_thread(recorder.writes_committed.wait, WAIT_FOR_A_WRITE_S)
        result = await super().execute(query, params, **kwargs)
        recorder.committed(query, params)
        return result


@pytest.fixture
def recorder() -> Iterator[Committed]:
    global COMMITTED
    COMMITTED = Committed()
    yield COMMITTED
    COMMITTED = Committed()


class State(TypedDict):
    log: Annotated[list[str], operator.add]


def _graph(saver: Any, *, asks: bool = False, may_go: threading.Event | None = None) -> Any:
    def a(state: State) -> dict[str, list[str]]:
        return {"log": ["a"]}

    def b(state: State) -> dict[str, list[str]]:
        if may_go is not None:
            may_go.wait(30)  # the checkpoint this step runs on is being stored
        if asks:
            interrupt("approve?")
        return {"log": ["b"]}

    def c(state: State) -> dict[str, list[str]]:
        return {"log": ["c"]}

    builder = StateGraph(State)
    builder.add_node("a", a)
    builder.add_node("b", b)
    builder.add_node("c", c)
    builder.add_edge(START, "a")
    builder.add_edge("a", "b")
    builder.add_edge("b", "c")
    builder.add_edge("c", END)
    return builder.compile(checkpointer=saver)


def _config() -> RunnableConfig:
    return {"configurable": {"thread_id": f"flush-{uuid.uuid4()}"}}


@pytest.fixture
def sync_saver(db_dsn: str, saver: DurablePostgresSaver) -> Iterator[DurablePostgresSaver]:
    """A saver on a pool of recording connections (`saver` has set the database up)."""
    kwargs = {**CONNECTION_KWARGS, "cursor_factory": RecordingCursor}
    with ConnectionPool(db_dsn, min_size=1, max_size=4, kwargs=kwargs, open=True) as pool:
        yield DurablePostgresSaver(pool)


def test_async_runs_commit_all_but_the_last_checkpoint_without_a_flush(
    sync_saver: DurablePostgresSaver, recorder: Committed
) -> None:
    graph = _graph(sync_saver)
    assert graph.invoke({"log": []}, _config(), durability="async") == {"log": ["a", "b", "c"]}
    puts = recorder.puts()
    # The input's checkpoint (-1) and those after a, b and c's steps' starts: more follow.
    assert puts[:-1] == [("off", step) for step in (-1, 0, 1, 2)]
    assert puts[-1] == ("on", 3)  # the last: flushes the others too
    assert recorder.seen[-1][:2] == ("put", "on")


@pytest.mark.parametrize("durability", ["sync", "exit"])
def test_other_modes_flush_every_checkpoint(
    sync_saver: DurablePostgresSaver, recorder: Committed, durability: str
) -> None:
    graph = _graph(sync_saver)
    graph.invoke({"log": []}, _config(), durability=durability)
    assert recorder.puts()
    assert {mode for mode, _ in recorder.puts()} == {"on"}


def test_update_state_flushes_its_checkpoint(
    sync_saver: DurablePostgresSaver, recorder: Committed
) -> None:
    """Called outside a run: its caller expects it durable on return."""
    graph = _graph(sync_saver, asks=True)
    config = _config()
    graph.invoke({"log": []}, config, durability="async")
    recorder.seen.clear()
    graph.update_state(config, {"log": ["edited"]})
    assert [mode for mode, _ in recorder.puts()] == ["on"]


def test_an_interrupt_commits_after_the_checkpoint_it_stopped_on(
    sync_saver: DurablePostgresSaver, recorder: Committed
) -> None:
    """The interrupt's write is stored with a synchronous commit; when the checkpoint its
    step runs on is still being stored (held back here until a write commits, or
    `WAIT_FOR_A_WRITE_S`), the write waits for it, so its commit flushes that checkpoint
    too. Without the wait the write commits first and nothing flushes the checkpoint."""
    recorder.block_step = 1  # the checkpoint node b runs on
    graph = _graph(sync_saver, asks=True, may_go=recorder.node_may_go)
    config = _config()
    graph.invoke({"log": []}, config, durability="async")
    assert graph.get_state(config).next == ("b",)
    step_1 = recorder.seen.index(("put", "off", 1))
    assert ("writes", "on", None) in recorder.seen[step_1 + 1 :], recorder.seen


async def test_the_async_saver_commits_the_same_way(
    db_dsn: str, saver: DurablePostgresSaver, recorder: Committed
) -> None:
    kwargs = {**CONNECTION_KWARGS, "cursor_factory": AsyncRecordingCursor}
    async with AsyncConnectionPool(db_dsn, min_size=1, max_size=4, kwargs=kwargs) as pool:
        saver = AsyncDurablePostgresSaver(pool)
        graph = _graph(saver)
        assert await graph.ainvoke({"log": []}, _config(), durability="async") == {
            "log": ["a", "b", "c"]
        }
        assert recorder.puts() == [("off", step) for step in (-1, 0, 1, 2)] + [("on", 3)]

        recorder.seen.clear()
        recorder.block_step = 1
        asking = _graph(saver, asks=True, may_go=recorder.node_may_go)
        config = _config()
        await asking.ainvoke({"log": []}, config, durability="async")
        assert (await asking.aget_state(config)).next == ("b",)
        step_1 = recorder.seen.index(("put", "off", 1))
        assert ("writes", "on", None) in recorder.seen[step_1 + 1 :], recorder.seen
