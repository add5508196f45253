"""The parking of task writes for the next checkpoint, without a database.

`prepare` stands for serializing a call's writes and `store_alone` for their own
statement; `take` and `settle` are what a `put` does around its statement. A writer whose
writes park returns at once; the parking stores them alone when no put takes them in
time, when the put that took them failed, or when their step ended.

Nothing here depends on the machine's speed. A put is made to find writes parked by
starting it once their call is busy (its `prepare` has run): `take` waits while a call for
its keys is busy, so it returns when the writes have parked, or once they were stored
alone. Lingers that a put must beat are `HANG_S` long: a correct run never waits them out.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from langgraph_durable.checkpoint import _parking
from langgraph_durable.checkpoint._parking import (
    COLD_PUTS,
    MAX_WAIT_FACTOR,
    AsyncWriteParking,
    WriteParking,
)

KEY = ("thread", "", "checkpoint-1")

HANG_S = 60.0
"""Bounds waits that only guard against a hang; a correct run never waits it out."""


def prepared(params: dict[str, Any], *, park: bool = True) -> Callable[[], Any]:
    return lambda: (park, params)


def store_in_thread(
    parking: WriteParking,
    key: tuple[str, str, str],
    params: dict[str, Any],
    store_alone: Callable[[dict[str, Any]], None],
    *,
    park: bool = True,
    then: Callable[[], None] = lambda: None,
) -> threading.Thread:
    """Starts `store` (then `then`) in a thread; returns once the call counts as busy.

    A `take` made from then on waits for the call: it finds the writes if they parked.
    Daemon, so that a test failing while the writer waits for a put cannot hang the run.
    """
    busy = threading.Event()

    def prepare() -> tuple[bool, dict[str, Any]]:
        busy.set()
        return park, params

    def run() -> None:
        parking.store(key, prepare, store_alone)
        then()

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    assert busy.wait(HANG_S)
    return worker


def test_parked_writes_are_taken_by_a_put_and_not_stored_alone() -> None:
    parking = WriteParking(linger=HANG_S)
    stored_alone: list[dict[str, Any]] = []
    assert parking.store(KEY, prepared({"w": 1}), stored_alone.append)  # parked: returns
    taken = parking._take([KEY])
    assert [entry.params for entry in taken] == [{"w": 1}]
    parking._settle(taken)
    assert stored_alone == []
    assert parking._registry.parked == {}
    assert parking._registry.none_busy([KEY])
    parking.flush()
    assert stored_alone == []


def test_writes_no_put_takes_in_time_are_stored_alone_and_the_thread_goes_cold() -> None:
    parking = WriteParking(linger=0.01)
    stored_alone: list[dict[str, Any]] = []
    stored = threading.Event()

    def alone(params: dict[str, Any]) -> None:
        stored_alone.append(params)
        stored.set()

    assert parking.store(KEY, prepared({"w": 1}), alone)  # parked; no put ever comes
    assert stored.wait(HANG_S)  # the sweeper stored them alone
    until(lambda: parking._registry.none_busy([KEY]))
    assert parking._registry.parked == {}
    # A put past another checkpoint counts one cold put (a put for KEY itself would show
    # that the wait was too short: see the test of late puts).
    assert parking._take([("thread", "", "elsewhere")]) == []
    # From here a put must find any writes that park, however slow this thread is to get
    # to it: the 10 ms linger was for the timeout above.
    parking._registry.linger = parking._registry.wait = HANG_S
    # The thread's next writes are stored at once, however many calls a step makes, in
    # any namespace (a subgraph's changes every step)...
    for step in range(COLD_PUTS - 1):
        key = ("thread", f"sub:{step}", f"checkpoint-{step + 2}")
        cold: list[dict[str, Any]] = []
        workers = [store_in_thread(parking, key, {"call": n}, cold.append) for n in range(3)]
        # The put waits for the busy calls and would take their writes had they parked.
        assert parking._take([key]) == [], f"writes parked {step + 2} checkpoints in"
        assert sorted(params["call"] for params in cold) == [0, 1, 2]
        for worker in workers:
            worker.join(HANG_S)
    # ...until the thread has made COLD_PUTS checkpoints; then it parks again.
    assert parking.store(KEY, prepared({"w": 2}), alone)
    taken = parking._take([KEY])
    assert [entry.params for entry in taken] == [{"w": 2}]
    parking._settle(taken)
    assert stored_alone == [{"w": 1}]
    parking.flush()


def test_a_put_carries_only_writes_parked_under_its_own_fencing_token() -> None:
    """The put's fence decides for everything it carries: writes another holder of the
    thread parked (a stale one's) stay parked, to be stored alone behind their own fence."""
    parking = WriteParking(linger=HANG_S)
    stored_alone: list[dict[str, Any]] = []
    assert parking.store(KEY, prepared({"w": "stale", "fence_token": 1}), stored_alone.append)
    assert parking.store(KEY, prepared({"w": "fresh", "fence_token": 2}), stored_alone.append)
    taken = parking._take([KEY], 2)
    assert [entry.params["w"] for entry in taken] == ["fresh"]
    parking._settle(taken)
    left_behind = parking._registry.parked[KEY]
    assert [entry.params["w"] for entry in left_behind] == ["stale"]
    assert left_behind[0].state == "parked"
    assert parking._take([KEY]) == []  # nor does a put without a token take them
    left = parking._take([KEY], 1)
    assert [entry.params["w"] for entry in left] == ["stale"]
    parking._settle(left)
    assert stored_alone == []
    assert parking._registry.parked == {}


def test_writes_that_may_not_park_are_stored_at_once() -> None:
    parking = WriteParking(linger=HANG_S)
    stored_alone: list[dict[str, Any]] = []
    worker = store_in_thread(parking, KEY, {"w": 1}, stored_alone.append, park=False)
    # The put waits for the busy call and would take its writes had they parked; stored
    # at once, they are in before it goes on.
    assert parking._take([KEY]) == []
    assert stored_alone == [{"w": 1}]
    worker.join(HANG_S)
    assert not worker.is_alive()


def test_writes_taken_by_a_failed_put_are_stored_alone_before_it_raises() -> None:
    """The writes were valid; only the checkpoint failed, and its error is the put's: it
    stores them alone first, as their writers did when they waited, so a run that failed
    has stored them by the time it raises. A put retried meanwhile waits for them."""
    parking = WriteParking(linger=HANG_S)
    release, storing, taking = threading.Event(), threading.Event(), threading.Event()
    order: list[str] = []

    def slow_alone(params: dict[str, Any]) -> None:
        storing.set()
        release.wait(HANG_S)
        order.append("writes")

    def failed_put() -> None:
        try:
            with parking.carried_by_put([KEY], fence_token=None) as taken:
                assert [entry.params for entry in taken] == [{"w": 1}]
                raise RuntimeError("server went away")
        except RuntimeError:
            order.append("put raised")

    def retried_put() -> None:
        taking.set()
        parking._take([KEY])
        order.append("checkpoint")

    assert parking.store(KEY, prepared({"w": 1}), slow_alone)
    put = threading.Thread(target=failed_put, daemon=True)
    put.start()
    assert storing.wait(HANG_S)
    retry = threading.Thread(target=retried_put, daemon=True)
    retry.start()
    assert taking.wait(HANG_S)
    retry.join(timeout=0.1)  # a bounded look for calls that did not wait; order decides
    assert order == []
    release.set()
    put.join(HANG_S)
    retry.join(HANG_S)
    assert order[0] == "writes"
    assert sorted(order[1:]) == ["checkpoint", "put raised"]
    parking.flush()


def test_take_waits_for_writes_being_serialized_or_stored_alone() -> None:
    """Invariant I4: a checkpoint does not commit ahead of writes already under way, even
    while they are still being serialized."""
    parking = WriteParking(linger=0)
    release, serializing = threading.Event(), threading.Event()
    order: list[str] = []

    def slow_prepare() -> tuple[bool, dict[str, Any]]:
        serializing.set()
        release.wait(HANG_S)
        return True, {}

    worker = threading.Thread(
        target=parking.store, args=(KEY, slow_prepare, lambda p: order.append("writes"))
    )
    worker.start()
    assert serializing.wait(HANG_S)

    def put() -> None:
        parking._take([KEY])
        order.append("checkpoint")

    taker = threading.Thread(target=put, daemon=True)
    taker.start()
    taker.join(timeout=0.1)  # a bounded look for a put that did not wait; order decides
    assert order == []
    release.set()
    worker.join(HANG_S)
    taker.join(HANG_S)
    assert order == ["writes", "checkpoint"]


def test_a_failing_serialization_leaves_nothing_busy() -> None:
    parking = WriteParking(linger=5.0)

    def broken() -> tuple[bool, dict[str, Any]]:
        raise ValueError("cannot serialize")

    with pytest.raises(ValueError, match="cannot serialize"):
        parking.store(KEY, broken, lambda p: None)
    assert parking._take([KEY]) == []  # returns at once: nothing is busy or parked


def until(condition: Callable[[], bool]) -> None:
    """Waits for another thread to bring about `condition` (state, not a duration)."""
    pause = threading.Event()
    for _ in range(int(HANG_S * 1000)):
        if condition():
            return
        pause.wait(0.001)
    raise AssertionError("condition never held")


async def yield_to_others(times: int = 10) -> None:
    """Lets every other ready task on the loop run (a few rounds); no wall time involved."""
    for _ in range(times):
        await asyncio.sleep(0)


async def test_async_parked_writes_are_taken_by_a_put() -> None:
    parking = AsyncWriteParking(linger=HANG_S)
    stored_alone: list[dict[str, Any]] = []

    async def alone(params: dict[str, Any]) -> None:
        stored_alone.append(params)

    assert await parking.store(KEY, prepared({"w": 1}), alone)  # parked: returns
    taken = await parking._take([KEY])
    assert [entry.params for entry in taken] == [{"w": 1}]
    parking._settle(taken)
    await parking.flush()
    assert stored_alone == []
    assert parking._registry.none_busy([KEY])


async def test_async_put_carries_only_writes_parked_under_its_own_fencing_token() -> None:
    parking = AsyncWriteParking(linger=HANG_S)
    stored_alone: list[dict[str, Any]] = []

    async def alone(params: dict[str, Any]) -> None:
        stored_alone.append(params)

    assert await parking.store(KEY, prepared({"w": "s", "fence_token": 1}), alone)
    assert await parking.store(KEY, prepared({"w": "f", "fence_token": 2}), alone)
    async with parking.carried_by_put([KEY], fence_token=2) as taken:
        assert [entry.params["w"] for entry in taken] == ["f"]
    assert [entry.params["w"] for entry in parking._registry.parked[KEY]] == ["s"]
    async with parking.carried_by_put([KEY], fence_token=1) as taken:
        assert [entry.params["w"] for entry in taken] == ["s"]
    await parking.flush()
    assert stored_alone == []


async def test_async_writes_no_put_takes_are_stored_alone() -> None:
    parking = AsyncWriteParking(linger=0.01)
    stored = asyncio.Event()
    stored_alone: list[dict[str, Any]] = []

    async def alone(params: dict[str, Any]) -> None:
        stored_alone.append(params)
        stored.set()

    assert await parking.store(KEY, prepared({"w": 1}), alone)  # parked; no put comes
    await asyncio.wait_for(stored.wait(), HANG_S)  # the sweep stored them alone
    await _until(lambda: parking._registry.none_busy([KEY]))
    assert parking._registry.parked == {}
    assert stored_alone == [{"w": 1}]
    assert not parking._registry.thread_is_warm(KEY)  # cold for its next checkpoints


async def test_async_failed_or_cancelled_put_stores_the_writes_alone() -> None:
    parking = AsyncWriteParking(linger=HANG_S)
    stored_alone: list[dict[str, Any]] = []

    async def alone(params: dict[str, Any]) -> None:
        stored_alone.append(params)

    assert await parking.store(KEY, prepared({"w": 1}), alone)
    taken = await parking._take([KEY])
    assert [entry.params for entry in taken] == [{"w": 1}]
    parking._settle(taken, RuntimeError("server went away"))
    assert not parking._registry.none_busy([KEY])  # a retried put waits for them
    assert await asyncio.wait_for(parking._take([KEY]), HANG_S) == []
    assert stored_alone == [{"w": 1}]

    assert await parking.store(KEY, prepared({"w": 2}), alone)
    inside = asyncio.Event()

    async def put() -> None:
        async with parking.carried_by_put([KEY], fence_token=None) as taken:
            assert [entry.params for entry in taken] == [{"w": 2}]
            inside.set()
            await asyncio.Event().wait()  # its statement never returns

    cancelled = asyncio.create_task(put())
    await asyncio.wait_for(inside.wait(), HANG_S)
    cancelled.cancel()
    with pytest.raises(asyncio.CancelledError):
        await cancelled
    assert stored_alone == [{"w": 1}, {"w": 2}]  # stored before the cancellation went on
    assert parking._registry.none_busy([KEY])


async def test_async_take_cancelled_while_waiting_takes_nothing() -> None:
    """A put cancelled while it waits for writes under way must not strand parked ones."""
    parking = AsyncWriteParking(linger=HANG_S)
    release = asyncio.Event()
    stored_alone: list[dict[str, Any]] = []

    async def slow_alone(params: dict[str, Any]) -> None:
        await release.wait()
        stored_alone.append(params)

    busy = asyncio.create_task(parking.store(KEY, prepared({"alone": 1}, park=False), slow_alone))
    await asyncio.sleep(0)
    assert await parking.store(KEY, prepared({"parked": 1}), slow_alone)
    put = asyncio.create_task(parking._take([KEY]))
    await yield_to_others()
    assert not put.done()  # waiting for the writes stored alone
    put.cancel()
    with pytest.raises(asyncio.CancelledError):
        await put
    release.set()
    await asyncio.wait_for(busy, HANG_S)
    taken = await asyncio.wait_for(parking._take([KEY]), HANG_S)
    assert [entry.params for entry in taken] == [{"parked": 1}]
    parking._settle(taken)
    assert stored_alone == [{"alone": 1}]


def test_writes_langgraph_waits_for_are_never_parked() -> None:
    from langgraph._internal._constants import CONFIG_KEY_RUNTIME, ERROR_SOURCE_NODE
    from langgraph.checkpoint.base import WRITES_IDX_MAP

    from langgraph_durable.checkpoint._parking import writes_may_wait

    def may_wait(config: Any, writes: Any, delta_channels: set[str]) -> bool:
        return writes_may_wait(config, writes, delta_channels, final_checkpoint=False)

    in_loop: Any = {"configurable": {"thread_id": "t", CONFIG_KEY_RUNTIME: object()}}
    assert may_wait(in_loop, [("log", 1), ("__pregel_tasks", 2)], set())
    for special in WRITES_IDX_MAP:
        assert not may_wait(in_loop, [("log", 1), (special, 2)], set())
    assert not may_wait(in_loop, [(ERROR_SOURCE_NODE, "node"), ("__error__", "x")], set())
    assert not may_wait(in_loop, [("messages", [1])], {"messages"})
    # writes for the final checkpoint of a run under durability="exit": nothing follows
    assert not writes_may_wait(in_loop, [("log", 1)], set(), final_checkpoint=True)
    # update_state stores its writes before its checkpoint, from the caller's thread
    assert not may_wait({"configurable": {"thread_id": "t"}}, [("log", 1)], set())


def test_delta_channels_are_learned_from_snapshots_and_counters() -> None:
    from langgraph.checkpoint.serde.types import _DeltaSnapshot

    from langgraph_durable.checkpoint import _core

    metadata: Any = {"step": 3, "counters_since_delta_snapshot": {"messages": (1, 2)}}
    blobs = {"history": _DeltaSnapshot([1, 2]), "plain": [3]}
    assert _core.delta_channel_names(metadata, blobs) == {"messages", "history"}
    assert _core.delta_channel_names({"step": 1}, {"plain": [3]}) == set()


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
        while not registry.thread_is_warm(key):
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


async def _until(condition: Callable[[], bool]) -> None:
    """Yields to the loop until `condition` holds (cooperative: no clock involved)."""
    for _ in range(100_000):
        if condition():
            return
        await asyncio.sleep(0)
    raise AssertionError("condition never held")


@pytest.mark.parametrize("put_commits", [True, False])
async def test_writes_failing_alone_go_to_the_put_waiting_for_them(put_commits: bool) -> None:
    """An outage or timeout while writes are stored alone, with the checkpoint after them
    already waiting: the checkpoint takes them; their call succeeds only if it commits."""
    from langgraph_durable.errors import PoolTimeoutError

    parking = AsyncWriteParking(linger=0)  # every write is stored alone
    fail_now = asyncio.Event()
    attempts: list[dict[str, Any]] = []

    async def store_alone(params: dict[str, Any]) -> None:
        attempts.append(params)
        await fail_now.wait()
        raise PoolTimeoutError("server down")

    writer = asyncio.create_task(parking.store(KEY, prepared({"w": 1}), store_alone))
    await _until(lambda: bool(attempts))
    put = asyncio.create_task(parking._take([KEY, ("thread", "", "checkpoint-2")]))
    await _until(lambda: KEY in parking._registry.puts_waiting)
    fail_now.set()
    taken = await asyncio.wait_for(put, HANG_S)
    assert [entry.params for entry in taken] == [{"w": 1}]
    assert not writer.done()  # it waits for the put's outcome
    if put_commits:
        parking._settle(taken)
        await asyncio.wait_for(writer, HANG_S)
    else:
        parking._settle(taken, RuntimeError("put failed too"))
        with pytest.raises(PoolTimeoutError):
            await asyncio.wait_for(writer, HANG_S)
    assert len(attempts) == 1
    assert parking._registry.none_busy([KEY])
    assert not parking._registry.parked


async def test_writes_failing_alone_without_a_waiting_put_or_for_their_own_reason_raise() -> None:
    from langgraph_durable.errors import PoolTimeoutError

    parking = AsyncWriteParking(linger=0)

    async def down(params: dict[str, Any]) -> None:
        raise PoolTimeoutError("server down")

    async def bad(params: dict[str, Any]) -> None:
        raise ValueError("the writes themselves")

    with pytest.raises(PoolTimeoutError):
        await parking.store(KEY, prepared({"w": 1}), down)
    fail_now = asyncio.Event()

    async def bad_later(params: dict[str, Any]) -> None:
        await fail_now.wait()
        await bad(params)

    writer = asyncio.create_task(parking.store(KEY, prepared({"w": 2}), bad_later))
    await _until(lambda: not parking._registry.none_busy([KEY]))
    put = asyncio.create_task(parking._take([KEY]))
    await _until(lambda: KEY in parking._registry.puts_waiting)
    fail_now.set()
    with pytest.raises(ValueError, match="themselves"):
        await asyncio.wait_for(writer, HANG_S)
    assert await asyncio.wait_for(put, HANG_S) == []
    assert parking._registry.none_busy([KEY])


def test_a_put_that_comes_late_makes_the_wait_longer_and_the_thread_warm() -> None:
    from langgraph_durable.checkpoint._parking import _Registry

    registry = _Registry(linger=0.002)
    key = ("thread", "", "c1")
    registry.enter(key)
    entry = registry.park(key, {}, threading.Event())
    entry.parked_at -= 0.010  # parked 10 ms ago
    assert registry.unpark(key, entry, timed_out=True)
    assert not registry.thread_is_warm(key)
    assert registry.take([("thread", "", "c2"), key]) == []  # the put, 10 ms after
    assert registry.thread_is_warm(key)
    assert 0.020 <= registry.wait <= 0.021  # twice the delay seen
    # Puts that take their writes well within the wait bring it back towards the linger.
    for _ in range(1000):
        registry.enter(key)
        registry.park(key, {}, threading.Event())
        assert len(registry.take([key])) == 1
    assert registry.wait == registry.linger


def test_a_put_long_after_its_writes_timed_out_changes_nothing() -> None:
    from langgraph_durable.checkpoint._parking import _Registry

    registry = _Registry(linger=0.002)
    key = ("thread", "", "c1")
    registry.enter(key)
    entry = registry.park(key, {}, threading.Event())
    entry.parked_at -= 0.002 * MAX_WAIT_FACTOR + 1  # a step that ran for a second more
    assert registry.unpark(key, entry, timed_out=True)
    registry.take([key])
    assert not registry.thread_is_warm(key)
    assert registry.wait == registry.linger


def test_a_settle_that_fails_midway_still_wakes_every_writer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from langgraph_durable.checkpoint._parking import ParkedWrites, _Registry

    registry = _Registry(linger=0.002)
    signals = [threading.Event() for _ in range(3)]
    taken = [ParkedWrites(("thread", "", f"c{n}"), {}, signal) for n, signal in enumerate(signals)]

    counted: list[tuple[str, str, str]] = []
    enter = registry.enter

    def counting_fails_at_the_second(key: tuple[str, str, str]) -> None:
        if counted:
            raise MemoryError
        counted.append(key)
        enter(key)

    monkeypatch.setattr(registry, "enter", counting_fails_at_the_second)
    with pytest.raises(MemoryError):
        registry.settle(taken, RuntimeError("the put failed"))
    assert all(signal.is_set() for signal in signals)
    # No writer may take writes of the failed put for stored, counted or not.
    assert all(entry.error is not None for entry in taken)
    assert [entry.counted_busy for entry in taken] == [True, False, False]


async def test_writes_of_a_failed_put_count_busy_until_they_are_stored_alone() -> None:
    """Every write a failed put took counts busy until it is stored alone: a put must wait
    for all of them."""
    parking = AsyncWriteParking(linger=HANG_S)
    registry = parking._registry
    both_inside, release = asyncio.Event(), asyncio.Event()
    seen_busy: list[int] = []

    async def alone(params: dict[str, Any]) -> None:
        seen_busy.append(registry.busy.get(KEY, 0))
        if len(seen_busy) == 2:
            both_inside.set()
        await release.wait()

    for n in range(2):
        assert await parking.store(KEY, prepared({"w": n}), alone)
    taken = await parking._take([KEY])
    assert len(taken) == 2
    parking._settle(taken, RuntimeError("server went away"))
    await asyncio.wait_for(both_inside.wait(), HANG_S)
    assert registry.busy[KEY] == 2
    put = asyncio.create_task(parking._take([KEY]))
    await yield_to_others()
    assert not put.done()
    release.set()
    assert await asyncio.wait_for(put, HANG_S) == []
    assert KEY not in registry.busy


@pytest.mark.parametrize("flavor", ["threads", "asyncio"])
async def test_writes_that_end_their_step_store_the_writes_parked_beside_them(
    flavor: str,
) -> None:
    """An interrupt or an error ends the step: no put will carry the writes of its sibling
    tasks, so they are stored before the call returns (a run that has returned has stored
    them all), and later siblings' writes for that checkpoint do not park."""
    stored: list[str] = []
    other = ("thread", "", "checkpoint-2")

    if flavor == "threads":
        parking: Any = WriteParking(linger=HANG_S)

        async def store(key: Any, w: str, *, park: bool = True, ends: bool = False) -> bool:
            result: bool = parking.store(
                key, prepared({"w": w}, park=park), lambda p: stored.append(p["w"]), ends_step=ends
            )
            return result

    else:
        parking = AsyncWriteParking(linger=HANG_S)

        async def alone(params: dict[str, Any]) -> None:
            stored.append(params["w"])

        async def store(key: Any, w: str, *, park: bool = True, ends: bool = False) -> bool:
            result: bool = await parking.store(
                key, prepared({"w": w}, park=park), alone, ends_step=ends
            )
            return result

    assert await store(KEY, "sibling")
    assert await store(other, "elsewhere")
    assert not await store(KEY, "interrupt", park=False, ends=True)
    assert sorted(stored) == ["interrupt", "sibling"]
    assert not await store(KEY, "late sibling")  # stored at once: no put will follow
    assert stored[-1] == "late sibling"
    assert list(parking._registry.parked) == [other]  # other checkpoints park as before


@pytest.mark.parametrize("flavor", ["threads", "asyncio"])
async def test_a_read_of_a_thread_and_a_flush_store_what_is_parked(flavor: str) -> None:
    stored: list[str] = []
    mine, theirs = KEY, ("other-thread", "", "checkpoint-1")
    subgraph = ("thread", "sub:1", "checkpoint-9")
    if flavor == "threads":
        parking: Any = WriteParking(linger=HANG_S)
        for key, w in ((mine, "mine"), (subgraph, "sub"), (theirs, "theirs")):
            assert parking.store(key, prepared({"w": w}), lambda p: stored.append(p["w"]))
        parking.flush_thread("thread", "")
        assert stored == ["mine"]
        parking.flush_thread("thread")
        assert stored == ["mine", "sub"]
        assert list(parking._registry.parked) == [theirs]
        parking.flush()
        assert stored == ["mine", "sub", "theirs"]
    else:
        parking = AsyncWriteParking(linger=HANG_S)

        async def alone(params: dict[str, Any]) -> None:
            stored.append(params["w"])

        for key, w in ((mine, "mine"), (subgraph, "sub"), (theirs, "theirs")):
            assert await parking.store(key, prepared({"w": w}), alone)
        await parking.flush_thread("thread", "")
        assert stored == ["mine"]
        await parking.flush_thread("thread")
        assert stored == ["mine", "sub"]
        assert list(parking._registry.parked) == [theirs]
        await parking.flush()
        assert stored == ["mine", "sub", "theirs"]
    assert parking._registry.parked == {}


def test_writes_timing_out_that_fail_alone_go_to_the_put_waiting_for_them() -> None:
    """The sweeper stores timed-out writes alone; an outage then, with their put already
    waiting, hands them to that put rather than dropping them."""
    from langgraph_durable.errors import PoolTimeoutError

    parking = WriteParking(linger=0.01)
    storing, fail_now = threading.Event(), threading.Event()

    def down(params: dict[str, Any]) -> None:
        storing.set()
        fail_now.wait(HANG_S)
        raise PoolTimeoutError("server down")

    assert parking.store(KEY, prepared({"w": 1}), down)
    assert storing.wait(HANG_S)  # the sweeper stores them alone: busy
    found: list[Any] = []
    put = threading.Thread(target=lambda: found.extend(parking._take([KEY])), daemon=True)
    put.start()
    until(lambda: KEY in parking._registry.puts_waiting)
    fail_now.set()
    put.join(HANG_S)
    assert [entry.params for entry in found] == [{"w": 1}]
    parking._settle(found)
    assert parking._registry.none_busy([KEY])
    parking.flush()


async def test_a_put_s_own_checkpoint_lets_writes_parked_meanwhile_wait_again() -> None:
    """Writes parked for a checkpoint while its own put is still under way wait for the
    next put from when that one finished (it follows it), not from when they parked."""
    parking = AsyncWriteParking(linger=HANG_S)
    stored_alone: list[dict[str, Any]] = []

    async def alone(params: dict[str, Any]) -> None:
        stored_alone.append(params)

    async with parking.carried_by_put([KEY], fence_token=None):
        assert await parking.store(KEY, prepared({"w": 1}), alone)
        (entry,) = parking._registry.parked[KEY]
        entry.parked_at -= 2 * HANG_S  # it has waited long: only the put holds it back
        assert parking._registry.expired(time.monotonic(), {KEY}) == []
    # The put has finished: the wait starts again from now.
    assert parking._registry.expired(time.monotonic(), set()) == []
    assert parking._registry.parked[KEY] == [entry]
    assert stored_alone == []


@pytest.mark.parametrize("flavor", ["threads", "asyncio"])
async def test_a_read_waits_for_its_thread_s_writes_being_stored_alone(flavor: str) -> None:
    """Writes the parking is storing alone (a sweep, a failed put) are no longer parked;
    a read of their thread waits for them, as it did while their writer waited."""
    release = threading.Event()
    order: list[str] = []
    if flavor == "threads":
        parking: Any = WriteParking(linger=HANG_S)

        def slow(params: dict[str, Any]) -> None:
            release.wait(HANG_S)
            order.append("writes")

        assert parking.store(KEY, prepared({"w": 1}), slow)
        (entry,) = parking._registry.expired(time.monotonic() + 2 * HANG_S, set())
        storing = threading.Thread(target=parking._store_alone, args=(entry,), daemon=True)
        storing.start()

        def read() -> None:
            parking.flush_thread("thread", "")
            order.append("read")

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        reader.join(timeout=0.1)  # a bounded look for a read that did not wait
        assert order == []
        release.set()
        reader.join(HANG_S)
        storing.join(HANG_S)
    else:
        parking = AsyncWriteParking(linger=HANG_S)
        gate = asyncio.Event()

        async def aslow(params: dict[str, Any]) -> None:
            await gate.wait()
            order.append("writes")

        assert await parking.store(KEY, prepared({"w": 1}), aslow)
        (entry,) = parking._registry.expired(time.monotonic() + 2 * HANG_S, set())
        parking._store_alone(entry)

        async def read() -> None:
            await parking.flush_thread("thread", "")
            order.append("read")

        reader_task = asyncio.create_task(read())
        await yield_to_others()
        assert order == []
        gate.set()
        await asyncio.wait_for(reader_task, HANG_S)
    assert order == ["writes", "read"]


@pytest.mark.parametrize("flavor", ["threads", "asyncio"])
async def test_an_error_leaves_writes_handed_over_to_a_waiting_put_for_that_put(
    flavor: str,
) -> None:
    """Writes that failed alone and were handed to the put waiting for them belong to that
    put (their writer waits for its outcome): a sibling's error in the same step must not
    take them, or nobody would store them and their writer would wait for ever."""
    from langgraph_durable.checkpoint._parking import _Released, _Settled

    stored: list[str] = []
    signal: Any
    if flavor == "threads":
        parking: Any = WriteParking(linger=HANG_S)
        signal = _Released()
        with parking._changed:
            parking._registry.enter(KEY)
            handed = parking._registry.park(KEY, {"w": "handed"}, signal)
        assert not parking.store(
            KEY,
            prepared({"w": "error"}, park=False),
            lambda p: stored.append(p["w"]),
            ends_step=True,
        )
    else:
        parking = AsyncWriteParking(linger=HANG_S)
        signal = _Settled()
        parking._registry.enter(KEY)
        handed = parking._registry.park(KEY, {"w": "handed"}, signal)

        async def alone(params: dict[str, Any]) -> None:
            stored.append(params["w"])

        assert not await parking.store(
            KEY, prepared({"w": "error"}, park=False), alone, ends_step=True
        )
    assert stored == ["error"]
    assert parking._registry.parked[KEY] == [handed]  # still there for its put
    assert handed.state == "parked"


PARENT = ("thread", "", "checkpoint-0")


def test_a_put_waits_for_the_step_s_writers_to_take_their_outbox_events() -> None:
    """Invariant I7: a writer that starts after its step's put (LangGraph submitted it
    first) still gets its writes, which hold its events, into that put."""
    parking = WriteParking(linger=HANG_S)  # only the put takes them
    asked = threading.Event()
    pending = [True]
    carried: list[list[dict[str, Any]]] = []

    def events_pending() -> bool:
        asked.set()
        return pending[0]

    def put() -> None:
        keys = [KEY, PARENT]
        with parking.carried_by_put(keys, fence_token=None, events_pending=events_pending) as taken:
            carried.append([entry.params for entry in taken])

    taker = threading.Thread(target=put, daemon=True)
    taker.start()
    assert asked.wait(HANG_S)  # the put is waiting before the writer starts

    def prepare() -> tuple[bool, dict[str, Any]]:
        pending[0] = False  # the writer takes its events once it counts as busy
        return True, {"task": "a"}

    assert parking.store(PARENT, prepare, lambda params: carried.append([{"alone": True}]))
    taker.join(HANG_S)
    assert carried == [[{"task": "a"}]]


async def test_async_put_waits_for_the_step_s_writers_to_take_their_outbox_events(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The writer here takes its events right after the put first asked, before the put's
    wait has started (asyncio.wait_for starts it on a later turn of the loop before
    Python 3.12): the put must still see the change, not wait out `EVENTS_WAIT`."""
    monkeypatch.setattr(_parking, "EVENTS_WAIT", 100 * HANG_S)
    parking = AsyncWriteParking(linger=HANG_S)
    asked = asyncio.Event()
    pending = [True]
    carried: list[list[dict[str, Any]]] = []

    def events_pending() -> bool:
        asked.set()
        return pending[0]

    async def put() -> None:
        keys = [KEY, PARENT]
        async with parking.carried_by_put(
            keys, fence_token=None, events_pending=events_pending
        ) as taken:
            carried.append([entry.params for entry in taken])

    taker = asyncio.ensure_future(put())
    await asked.wait()  # directly: resumed before the put's wait has started

    def prepare() -> tuple[bool, dict[str, Any]]:
        pending[0] = False
        return True, {"task": "a"}

    async def alone(params: dict[str, Any]) -> None:
        carried.append([{"alone": True}])

    assert await parking.store(PARENT, prepare, alone)
    await asyncio.wait_for(taker, HANG_S)
    assert carried == [[{"task": "a"}]]


@pytest.mark.parametrize("flavor", ["sync", "async"])
async def test_a_put_whose_events_are_never_taken_goes_on_and_says_so(
    flavor: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Events whose writes never come (refused, say) hold a put up for `EVENTS_WAIT`, not
    for ever: it then commits and logs what it did not wait for."""
    monkeypatch.setattr(_parking, "EVENTS_WAIT", 0.0)
    keys = [KEY, PARENT]
    with caplog.at_level(logging.WARNING, logger="langgraph_durable.checkpoint"):
        if flavor == "sync":
            with WriteParking(linger=0.002).carried_by_put(
                keys, fence_token=None, events_pending=lambda: True
            ) as taken:
                assert taken == []
        else:
            async with AsyncWriteParking(linger=0.002).carried_by_put(
                keys, fence_token=None, events_pending=lambda: True
            ) as taken:
                assert taken == []
    assert "without waiting longer for outbox events" in caplog.text


def test_a_flush_interrupted_midway_leaves_the_rest_parked_not_busy() -> None:
    """Ctrl-C while a read stores a thread's parked writes one by one: the write being
    stored and those after it are parked again, not left taken and busy (every later read
    or put of the thread would wait for them for ever); the next read stores them."""
    stored: list[str] = []
    interrupted = False

    def alone(params: dict[str, Any]) -> None:
        nonlocal interrupted
        if not interrupted:
            interrupted = True
            raise KeyboardInterrupt
        stored.append(params["w"])

    parking = WriteParking(linger=HANG_S)
    keys = [("thread", "", f"checkpoint-{n}") for n in range(3)]
    for key in keys:
        assert parking.store(key, prepared({"w": key[2]}), alone)
    with pytest.raises(KeyboardInterrupt):
        parking.flush_thread("thread")
    assert not parking._registry.busy
    assert sorted(parking._registry.parked) == keys
    reader = threading.Thread(target=parking.flush_thread, args=("thread",), daemon=True)
    reader.start()
    reader.join(HANG_S)
    assert not reader.is_alive()
    assert sorted(stored) == [key[2] for key in keys]
    assert parking._registry.parked == {}


def test_a_reader_beside_an_interrupted_one_still_stores_the_thread_s_writes() -> None:
    """Reader A took a thread's parked writes and is interrupted while storing them;
    reader B, waiting for them meanwhile, must not go on without them: they are parked
    again, and B stores them before it returns."""
    stored: list[str] = []
    a_storing, b_waits = threading.Event(), threading.Event()
    first = True

    def alone(params: dict[str, Any]) -> None:
        nonlocal first
        if first:
            first = False
            a_storing.set()
            assert b_waits.wait(HANG_S)
            raise KeyboardInterrupt
        stored.append(params["w"])

    parking = WriteParking(linger=HANG_S)
    keys = [("thread", "", f"checkpoint-{n}") for n in range(2)]
    for key in keys:
        assert parking.store(key, prepared({"w": key[2]}), alone)
    registry = parking._registry
    busy_in_thread = registry.busy_in_thread

    def watched(thread_id: str, checkpoint_ns: str | None) -> bool:
        if threading.current_thread().name == "reader-b":
            b_waits.set()  # B looks at what is being stored: it waits for A's writes
        return busy_in_thread(thread_id, checkpoint_ns)

    registry.busy_in_thread = watched  # type: ignore[method-assign]
    interrupted: list[bool] = []

    def reader_a() -> None:
        try:
            parking.flush_thread("thread")
        except KeyboardInterrupt:
            interrupted.append(True)

    a = threading.Thread(target=reader_a, daemon=True)
    a.start()
    assert a_storing.wait(HANG_S)
    b = threading.Thread(target=parking.flush_thread, args=("thread",), name="reader-b")
    b.daemon = True
    b.start()
    b.join(HANG_S)
    a.join(HANG_S)
    assert not b.is_alive()
    assert interrupted == [True]
    assert sorted(stored) == [key[2] for key in keys]
