"""The parking of task writes for the next checkpoint, without a database.

`store_alone` stands for the writes' own statement; `take` and `settle` are what a `put`
does around its statement.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest

from langgraph_durable.checkpoint._parking import (
    AsyncWriteParking,
    ParkedWrites,
    WriteParking,
    settle,
)

KEY = ("thread", "", "checkpoint-1")


def test_parked_writes_are_taken_by_a_put_and_not_stored_alone() -> None:
    parking = WriteParking(linger=5.0)
    stored_alone: list[str] = []
    finished = threading.Event()

    def put_writes() -> None:
        parking.store(KEY, {"w": 1}, lambda: stored_alone.append("alone"), park=True)
        finished.set()

    worker = threading.Thread(target=put_writes)
    worker.start()
    taken: list[ParkedWrites] = []
    deadline = time.monotonic() + 5
    while not taken and time.monotonic() < deadline:
        taken = list(parking.take([KEY]))
    assert [entry.params for entry in taken] == [{"w": 1}]
    assert not finished.wait(0.05)  # put_writes returns only once the put has committed
    settle(taken)
    worker.join(timeout=5)
    assert finished.is_set()
    assert stored_alone == []


def test_writes_no_put_takes_in_time_are_stored_alone() -> None:
    parking = WriteParking(linger=0.01)
    stored_alone: list[str] = []
    parking.store(KEY, {"w": 1}, lambda: stored_alone.append("alone"), park=True)
    assert stored_alone == ["alone"]
    assert parking.take([KEY]) == []  # nothing is left parked


def test_special_writes_are_never_parked() -> None:
    parking = WriteParking(linger=60.0)
    stored_alone: list[str] = []
    started = time.monotonic()
    parking.store(KEY, {"w": 1}, lambda: stored_alone.append("alone"), park=False)
    assert stored_alone == ["alone"]
    assert time.monotonic() - started < 1


def test_a_failed_put_fails_the_writes_it_carried() -> None:
    parking = WriteParking(linger=5.0)
    errors: list[BaseException] = []

    def put_writes() -> None:
        try:
            parking.store(KEY, {"w": 1}, lambda: None, park=True)
        except RuntimeError as exc:
            errors.append(exc)

    worker = threading.Thread(target=put_writes)
    worker.start()
    taken: list[ParkedWrites] = []
    while not taken:
        taken = list(parking.take([KEY]))
    settle(taken, RuntimeError("server went away"))
    worker.join(timeout=5)
    assert [str(e) for e in errors] == ["server went away"]


def test_take_waits_for_writes_being_stored_alone() -> None:
    """Invariant I4: a checkpoint does not commit before writes stored on their own."""
    parking = WriteParking(linger=0)
    release, in_statement = threading.Event(), threading.Event()
    order: list[str] = []

    def slow_statement() -> None:
        in_statement.set()
        release.wait(5)
        order.append("writes")

    worker = threading.Thread(
        target=parking.store, args=(KEY, {}, slow_statement), kwargs={"park": True}
    )
    worker.start()
    assert in_statement.wait(5)
    taker = threading.Thread(target=lambda: (parking.take([KEY]), order.append("checkpoint")))
    taker.start()
    taker.join(timeout=0.1)
    assert order == []
    release.set()
    worker.join(timeout=5)
    taker.join(timeout=5)
    assert order == ["writes", "checkpoint"]


async def test_async_parked_writes_are_taken_by_a_put() -> None:
    parking = AsyncWriteParking(linger=5.0)
    stored_alone: list[str] = []

    async def alone() -> None:
        stored_alone.append("alone")

    writes = asyncio.create_task(parking.store(KEY, {"w": 1}, alone, park=True))
    await asyncio.sleep(0)
    taken = await parking.take([KEY])
    assert [entry.params for entry in taken] == [{"w": 1}]
    await asyncio.sleep(0.01)
    assert not writes.done()
    settle(taken)
    await asyncio.wait_for(writes, 5)
    assert stored_alone == []


async def test_async_writes_no_put_takes_are_stored_alone() -> None:
    parking = AsyncWriteParking(linger=0.01)
    stored_alone: list[str] = []

    async def alone() -> None:
        stored_alone.append("alone")

    await parking.store(KEY, {"w": 1}, alone, park=True)
    assert stored_alone == ["alone"]
    assert await parking.take([KEY]) == []


async def test_async_failed_put_fails_the_writes_and_cancel_unparks() -> None:
    parking = AsyncWriteParking(linger=5.0)

    async def alone() -> None:
        raise AssertionError("not stored alone")

    writes = asyncio.create_task(parking.store(KEY, {}, alone, park=True))
    await asyncio.sleep(0)
    settle(await parking.take([KEY]), RuntimeError("server went away"))
    with pytest.raises(RuntimeError, match="server went away"):
        await writes

    cancelled = asyncio.create_task(parking.store(KEY, {}, alone, park=True))
    await asyncio.sleep(0)
    cancelled.cancel()
    with pytest.raises(asyncio.CancelledError):
        await cancelled
    assert await parking.take([KEY]) == []  # a cancelled caller's writes do not stay parked


def test_writes_langgraph_waits_for_are_never_parked() -> None:
    from langgraph._internal._constants import ERROR_SOURCE_NODE
    from langgraph.checkpoint.base import WRITES_IDX_MAP

    from langgraph_durable.checkpoint import _core

    assert _core.ERROR_SOURCE_NODE == ERROR_SOURCE_NODE  # caught if LangGraph renames it
    assert _core.may_park([("log", 1), ("__pregel_tasks", 2)], set())
    for special in WRITES_IDX_MAP:
        assert not _core.may_park([("log", 1), (special, 2)], set())
    assert not _core.may_park([(ERROR_SOURCE_NODE, "node"), ("__error__", "boom")], set())
    assert not _core.may_park([("messages", [1])], {"messages"})


def test_delta_channels_are_learned_from_snapshots_and_counters() -> None:
    from langgraph.checkpoint.serde.types import _DeltaSnapshot

    from langgraph_durable.checkpoint import _core

    metadata: Any = {"step": 3, "counters_since_delta_snapshot": {"messages": (1, 2)}}
    blobs = {"history": _DeltaSnapshot([1, 2]), "plain": [3]}
    assert _core.delta_channel_names(metadata, blobs) == {"messages", "history"}
    assert _core.delta_channel_names({"step": 1}, {"plain": [3]}) == set()
