"""The parking of task writes for the next checkpoint, without a database.

`prepare` stands for serializing a call's writes and `store_alone` for their own
statement; `take` and `settle` are what a `put` does around its statement.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from langgraph_durable.checkpoint._parking import (
    COLD_PUTS,
    AsyncWriteParking,
    ParkedWrites,
    WriteParking,
)

KEY = ("thread", "", "checkpoint-1")


def prepared(params: dict[str, Any], *, park: bool = True) -> Callable[[], Any]:
    return lambda: (park, params)


def take_when_parked(parking: WriteParking) -> list[ParkedWrites]:
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        if taken := parking.take([KEY]):
            return taken
        time.sleep(0.001)
    raise AssertionError("nothing was parked")


def test_parked_writes_are_taken_by_a_put_and_not_stored_alone() -> None:
    parking = WriteParking(linger=5.0)
    stored_alone: list[dict[str, Any]] = []
    finished = threading.Event()

    def put_writes() -> None:
        parking.store(KEY, prepared({"w": 1}), stored_alone.append)
        finished.set()

    worker = threading.Thread(target=put_writes)
    worker.start()
    taken = take_when_parked(parking)
    assert [entry.params for entry in taken] == [{"w": 1}]
    assert not finished.wait(0.05)  # put_writes returns only once the put has committed
    parking.settle(taken)
    worker.join(timeout=5)
    assert finished.is_set()
    assert stored_alone == []


def test_writes_no_put_takes_in_time_are_stored_alone_and_the_thread_goes_cold() -> None:
    parking = WriteParking(linger=0.01)
    stored_alone: list[dict[str, Any]] = []
    parking.store(KEY, prepared({"w": 1}), stored_alone.append)
    assert stored_alone == [{"w": 1}]
    assert parking.take([KEY]) == []  # nothing is left parked (and one cold put counted)
    # The thread's next writes do not wait for a put that cannot follow in time, in any
    # namespace (a subgraph's changes every step), however many calls a step makes...
    started = time.monotonic()
    for n in range(3 * COLD_PUTS):
        parking.store(("thread", f"sub:{n}", "checkpoint-2"), prepared({"n": n}), lambda p: None)
    assert time.monotonic() - started < COLD_PUTS * 0.01
    # ...until the thread has made COLD_PUTS checkpoints; then it parks again.
    for n in range(COLD_PUTS - 1):
        parking.take([("thread", "", f"checkpoint-{n + 3}")])
    warm = threading.Thread(
        target=parking.store, args=(KEY, prepared({"w": 2}), stored_alone.append)
    )
    warm.start()
    taken = take_when_parked(parking)
    parking.settle(taken)
    warm.join(5)
    assert stored_alone == [{"w": 1}]


def test_writes_that_may_not_park_are_stored_at_once() -> None:
    parking = WriteParking(linger=60.0)
    stored_alone: list[dict[str, Any]] = []
    started = time.monotonic()
    parking.store(KEY, prepared({"w": 1}, park=False), stored_alone.append)
    assert stored_alone == [{"w": 1}]
    assert time.monotonic() - started < 1


def test_writes_taken_by_a_failed_put_are_stored_alone_before_a_retry_commits() -> None:
    """The writes were valid; only the checkpoint failed, and its error is the put's. A put
    retried at once waits for them to be stored (they count as busy before the writer
    even wakes)."""
    parking = WriteParking(linger=5.0)
    release = threading.Event()
    order: list[str] = []

    def slow_alone(params: dict[str, Any]) -> None:
        release.wait(5)
        order.append("writes")

    worker = threading.Thread(target=parking.store, args=(KEY, prepared({"w": 1}), slow_alone))
    worker.start()
    parking.settle(take_when_parked(parking), RuntimeError("server went away"))
    retry = threading.Thread(target=lambda: (parking.take([KEY]), order.append("checkpoint")))
    retry.start()
    retry.join(timeout=0.1)
    assert order == []
    release.set()
    worker.join(timeout=5)
    retry.join(timeout=5)
    assert order == ["writes", "checkpoint"]


def test_take_waits_for_writes_being_serialized_or_stored_alone() -> None:
    """Invariant I4: a checkpoint does not commit ahead of writes already under way, even
    while they are still being serialized."""
    parking = WriteParking(linger=0)
    release, serializing = threading.Event(), threading.Event()
    order: list[str] = []

    def slow_prepare() -> tuple[bool, dict[str, Any]]:
        serializing.set()
        release.wait(5)
        return True, {}

    worker = threading.Thread(
        target=parking.store, args=(KEY, slow_prepare, lambda p: order.append("writes"))
    )
    worker.start()
    assert serializing.wait(5)
    taker = threading.Thread(target=lambda: (parking.take([KEY]), order.append("checkpoint")))
    taker.start()
    taker.join(timeout=0.1)
    assert order == []
    release.set()
    worker.join(timeout=5)
    taker.join(timeout=5)
    assert order == ["writes", "checkpoint"]


def test_a_failing_serialization_leaves_nothing_busy() -> None:
    parking = WriteParking(linger=5.0)

    def broken() -> tuple[bool, dict[str, Any]]:
        raise ValueError("cannot serialize")

    with pytest.raises(ValueError, match="cannot serialize"):
        parking.store(KEY, broken, lambda p: None)
    assert parking.take([KEY]) == []  # returns at once: nothing is busy or parked


async def test_async_parked_writes_are_taken_by_a_put() -> None:
    parking = AsyncWriteParking(linger=5.0)
    stored_alone: list[dict[str, Any]] = []

    async def alone(params: dict[str, Any]) -> None:
        stored_alone.append(params)

    writes = asyncio.create_task(parking.store(KEY, prepared({"w": 1}), alone))
    await asyncio.sleep(0)
    taken = await parking.take([KEY])
    assert [entry.params for entry in taken] == [{"w": 1}]
    await asyncio.sleep(0.01)
    assert not writes.done()
    parking.settle(taken)
    await asyncio.wait_for(writes, 5)
    assert stored_alone == []


async def test_async_writes_no_put_takes_are_stored_alone() -> None:
    parking = AsyncWriteParking(linger=0.01)
    stored_alone: list[dict[str, Any]] = []

    async def alone(params: dict[str, Any]) -> None:
        stored_alone.append(params)

    await parking.store(KEY, prepared({"w": 1}), alone)
    assert stored_alone == [{"w": 1}]
    assert await parking.take([KEY]) == []


async def test_async_failed_put_stores_the_writes_alone_and_cancel_unparks() -> None:
    parking = AsyncWriteParking(linger=5.0)
    stored_alone: list[dict[str, Any]] = []

    async def alone(params: dict[str, Any]) -> None:
        stored_alone.append(params)

    writes = asyncio.create_task(parking.store(KEY, prepared({"w": 1}), alone))
    await asyncio.sleep(0)
    parking.settle(await parking.take([KEY]), RuntimeError("server went away"))
    await asyncio.wait_for(writes, 5)
    assert stored_alone == [{"w": 1}]

    cancelled = asyncio.create_task(parking.store(KEY, prepared({"w": 2}), alone))
    await asyncio.sleep(0)
    cancelled.cancel()
    with pytest.raises(asyncio.CancelledError):
        await cancelled
    assert await asyncio.wait_for(parking.take([KEY]), 1) == []  # not parked, not busy


async def test_async_take_cancelled_while_waiting_takes_nothing() -> None:
    """A put cancelled while it waits for writes under way must not strand parked ones."""
    parking = AsyncWriteParking(linger=5.0)
    release = asyncio.Event()
    stored_alone: list[dict[str, Any]] = []

    async def slow_alone(params: dict[str, Any]) -> None:
        await release.wait()
        stored_alone.append(params)

    busy = asyncio.create_task(parking.store(KEY, prepared({"alone": 1}, park=False), slow_alone))
    await asyncio.sleep(0)
    parked = asyncio.create_task(parking.store(KEY, prepared({"parked": 1}), slow_alone))
    await asyncio.sleep(0)
    put = asyncio.create_task(parking.take([KEY]))
    await asyncio.sleep(0.01)
    put.cancel()
    with pytest.raises(asyncio.CancelledError):
        await put
    release.set()
    await asyncio.wait_for(busy, 5)
    taken = await asyncio.wait_for(parking.take([KEY]), 5)
    assert [entry.params for entry in taken] == [{"parked": 1}]
    parking.settle(taken)
    await asyncio.wait_for(parked, 5)
    assert stored_alone == [{"alone": 1}]


def test_writes_langgraph_waits_for_are_never_parked() -> None:
    from langgraph._internal._constants import CONFIG_KEY_RUNTIME, ERROR_SOURCE_NODE
    from langgraph.checkpoint.base import WRITES_IDX_MAP

    from langgraph_durable.checkpoint import _core

    in_loop: Any = {"configurable": {"thread_id": "t", CONFIG_KEY_RUNTIME: object()}}
    assert _core.may_park(in_loop, [("log", 1), ("__pregel_tasks", 2)], set())
    for special in WRITES_IDX_MAP:
        assert not _core.may_park(in_loop, [("log", 1), (special, 2)], set())
    assert not _core.may_park(in_loop, [(ERROR_SOURCE_NODE, "node"), ("__error__", "x")], set())
    assert not _core.may_park(in_loop, [("messages", [1])], {"messages"})
    # update_state stores its writes before its checkpoint, from the caller's thread
    assert not _core.may_park({"configurable": {"thread_id": "t"}}, [("log", 1)], set())


def test_delta_channels_are_learned_from_snapshots_and_counters() -> None:
    from langgraph.checkpoint.serde.types import _DeltaSnapshot

    from langgraph_durable.checkpoint import _core

    metadata: Any = {"step": 3, "counters_since_delta_snapshot": {"messages": (1, 2)}}
    blobs = {"history": _DeltaSnapshot([1, 2]), "plain": [3]}
    assert _core.delta_channel_names(metadata, blobs) == {"messages", "history"}
    assert _core.delta_channel_names({"step": 1}, {"plain": [3]}) == set()


async def test_async_writer_cancelled_after_its_writes_were_taken_leaves_nothing_busy() -> None:
    """Cancelled before the failed put settles: nobody stores the writes, nothing stays busy.
    Cancelled after it: the writer may already be storing them (asyncio's wait_for returns
    a finished result rather than raise); either way no busy count is left behind."""
    for cancel_first in (True, False):
        parking = AsyncWriteParking(linger=5.0)
        stored_alone: list[dict[str, Any]] = []

        async def alone(params: dict[str, Any], into: list[Any] = stored_alone) -> None:
            into.append(params)

        writer = asyncio.create_task(parking.store(KEY, prepared({"w": 1}), alone))
        await asyncio.sleep(0)
        taken = await parking.take([KEY])
        if cancel_first:
            writer.cancel()
            await asyncio.sleep(0)
            parking.settle(taken, RuntimeError("put failed"))
        else:
            parking.settle(taken, RuntimeError("put failed"))
            writer.cancel()
        await asyncio.gather(writer, return_exceptions=True)
        assert await asyncio.wait_for(parking.take([KEY]), 1) == []
        if cancel_first:
            assert stored_alone == []


def test_cold_periods_double_on_repeated_timeouts_and_reset_once_parking_works() -> None:
    from langgraph_durable.checkpoint._parking import _Registry

    registry = _Registry(linger=0.002)
    key = ("thread", "", "c1")

    def time_out() -> None:
        registry.enter(key)
        entry = registry.park(key, {}, threading.Event())  # no longer busy: parked
        assert registry.unpark(key, entry, timed_out=True)

    def puts_until_warm() -> int:
        count = 0
        while not registry.may_park(key):
            registry.take([("thread", "", f"p{count}")])
            count += 1
        return count

    time_out()
    assert puts_until_warm() == COLD_PUTS
    time_out()
    assert puts_until_warm() == 2 * COLD_PUTS
    registry.enter(key)
    registry.park(key, {}, threading.Event())
    assert len(registry.take([key])) == 1  # taken: parking works again
    time_out()
    assert puts_until_warm() == COLD_PUTS
