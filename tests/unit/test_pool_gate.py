"""The queue in front of an async pool (`_db/gate.py`), without a database.

The gate only reads the pool's settings (`max_size`, `timeout`, `max_waiting`, `closed`,
`name`), so a stand-in with them is the pool here; `tests/integration` runs every async
saver through the real one. Nothing waits on the clock except the timeout test, whose
borrower must time out (its bound is 0).
"""

from __future__ import annotations

import asyncio
import gc
import time
import weakref
from dataclasses import dataclass

import pytest
from psycopg_pool import PoolTimeout, TooManyRequests

from langgraph_durable._db.gate import HANDED_TURN_GRACE, AsyncPoolGate, PoolGate

HANG_S = 60.0
"""Bounds waits that only guard against a hang; a correct run never waits it out."""


@dataclass(eq=False)
class Pool:
    """What the gate reads of a pool."""

    max_size: int
    timeout: float = HANG_S
    max_waiting: int = 0
    closed: bool = False
    name: str = "test"


async def _started(*tasks: asyncio.Task[float]) -> None:
    """Lets `tasks` run up to their first wait."""
    for _ in range(3):
        await asyncio.sleep(0)
    assert not any(task.done() for task in tasks)


async def test_at_most_max_size_borrowers_pass_and_the_rest_go_in_order() -> None:
    pool, gate = Pool(max_size=2), AsyncPoolGate()
    assert await gate.enter(pool) == HANG_S
    assert await gate.enter(pool) == HANG_S
    order: list[int] = []

    async def borrower(n: int) -> float:
        left = await gate.enter(pool)
        order.append(n)
        return left

    waiting = [asyncio.create_task(borrower(n)) for n in range(3)]
    await _started(*waiting)
    gate.leave(pool)
    await asyncio.wait_for(waiting[0], HANG_S)
    assert order == [0]
    assert not waiting[1].done()
    gate.leave(pool)
    gate.leave(pool)
    await asyncio.wait_for(asyncio.gather(*waiting), HANG_S)
    assert order == [0, 1, 2]
    # The pool gets what is left of its timeout after the wait here.
    assert all(HANDED_TURN_GRACE <= task.result() < HANG_S for task in waiting)


async def test_a_borrower_that_waits_out_the_timeout_gets_pool_timeout() -> None:
    pool, gate = Pool(max_size=1), AsyncPoolGate()
    await gate.enter(pool)
    with pytest.raises(PoolTimeout):
        await gate.enter(Pool(max_size=1, timeout=0.0))
    gate.leave(pool)  # the one that passed; the timed-out one left no trace
    assert await gate.enter(pool) == HANG_S


async def test_a_cancelled_borrower_passes_its_turn_on() -> None:
    pool, gate = Pool(max_size=1), AsyncPoolGate()
    await gate.enter(pool)
    first = asyncio.create_task(gate.enter(pool))
    second = asyncio.create_task(gate.enter(pool))
    await _started(first, second)
    # The turn is handed to `first`, which is cancelled before it resumes: it must pass
    # the turn to `second` instead of keeping it.
    gate.leave(pool)
    first.cancel()
    with pytest.raises(asyncio.CancelledError):
        await first
    assert await asyncio.wait_for(second, HANG_S) > 0
    gate.leave(pool)
    assert await gate.enter(pool) == HANG_S  # nothing leaked: the gate is free again


async def test_turns_skip_borrowers_that_left_the_queue() -> None:
    pool, gate = Pool(max_size=1), AsyncPoolGate()
    await gate.enter(pool)
    gone, staying = asyncio.create_task(gate.enter(pool)), asyncio.create_task(gate.enter(pool))
    await _started(gone, staying)
    gone.cancel()
    with pytest.raises(asyncio.CancelledError):
        await gone
    gate.leave(pool)
    await asyncio.wait_for(staying, HANG_S)
    gate.leave(pool)
    assert await gate.enter(pool) == HANG_S


async def test_a_pool_grown_meanwhile_lets_more_through() -> None:
    pool, gate = Pool(max_size=1), AsyncPoolGate()
    await gate.enter(pool)
    queued = [asyncio.create_task(gate.enter(pool)) for _ in range(2)]
    await _started(*queued)
    pool.max_size = 3
    gate.leave(pool)
    await asyncio.wait_for(asyncio.gather(*queued), HANG_S)


async def test_a_pool_without_a_limit_or_not_open_lets_everyone_through() -> None:
    """A null pool's `max_size` is 0 (no limit); a closed pool raises its own error."""
    for pool in (Pool(max_size=0), Pool(max_size=1, closed=True)):
        gate = AsyncPoolGate()
        assert [await gate.enter(pool) for _ in range(5)] == [HANG_S] * 5
        for _ in range(5):
            gate.leave(pool)


async def test_borrowers_beyond_max_waiting_are_refused_as_the_pool_would() -> None:
    pool, gate = Pool(max_size=1, max_waiting=1), AsyncPoolGate()
    await gate.enter(pool)
    queued = asyncio.create_task(gate.enter(pool))
    await _started(queued)
    with pytest.raises(TooManyRequests):
        await gate.enter(pool)
    gate.leave(pool)
    await asyncio.wait_for(queued, HANG_S)


def test_a_gate_does_not_keep_its_pool_alive() -> None:
    pool = Pool(max_size=1)
    AsyncPoolGate.of(pool)
    gone = weakref.ref(pool)
    del pool
    gc.collect()
    assert gone() is None


def test_every_source_on_a_pool_shares_its_gate_and_the_sync_gate_passes_all() -> None:
    pool, other = Pool(max_size=1), Pool(max_size=1)
    assert AsyncPoolGate.of(pool) is AsyncPoolGate.of(pool)
    assert AsyncPoolGate.of(pool) is not AsyncPoolGate.of(other)
    gate = PoolGate.of(pool)
    assert [gate.enter(pool) for _ in range(10)] == [HANG_S] * 10
    gate.leave(pool)


async def test_a_pool_grown_meanwhile_lets_queued_borrowers_through_on_the_next_enter() -> None:
    """No `leave` needed: the next borrower to arrive admits those the new size allows."""
    pool, gate = Pool(max_size=1), AsyncPoolGate()
    await gate.enter(pool)
    queued = [asyncio.create_task(gate.enter(pool)) for _ in range(2)]
    await _started(*queued)
    pool.max_size = 3
    latecomer = asyncio.create_task(gate.enter(pool))
    await asyncio.wait_for(asyncio.gather(*queued), HANG_S)
    await _started(latecomer)  # the pool's three turns are taken: it waits
    gate.leave(pool)
    await asyncio.wait_for(latecomer, HANG_S)


async def test_a_turn_handed_over_in_time_leaves_the_pool_its_grace() -> None:
    """The loop was blocked past the borrower's deadline, but its turn was handed over
    before the deadline's timer could run: the pool gets `HANDED_TURN_GRACE`, not 0."""
    pool, gate = Pool(max_size=1, timeout=0.1), AsyncPoolGate()
    await gate.enter(pool)
    queued = asyncio.create_task(gate.enter(pool))
    await _started(queued)
    time.sleep(0.2)  # noqa: ASYNC251 - blocks the loop: the deadline passes, its timer not run
    gate.leave(pool)
    assert await asyncio.wait_for(queued, HANG_S) == HANDED_TURN_GRACE


async def test_leave_without_enter_is_refused() -> None:
    with pytest.raises(AssertionError):
        AsyncPoolGate().leave(Pool(max_size=1))


def test_a_borrower_left_on_a_closed_loop_gets_no_turn() -> None:
    """A loop closed with a borrower still queued (a pool that outlives the loop): its turn
    goes to the next borrower instead of raising in `leave` for a call that succeeded."""
    pool, gate = Pool(max_size=1), AsyncPoolGate()
    old = asyncio.new_event_loop()
    old.run_until_complete(gate.enter(pool))
    stranded = old.create_task(gate.enter(pool))
    old.run_until_complete(asyncio.sleep(0))  # queued behind the first borrower
    old.close()  # without cancelling it

    async def on_a_new_loop() -> float:
        waiting = asyncio.create_task(gate.enter(pool))
        await _started(waiting)
        gate.leave(pool)  # the first borrower's connection comes back
        return await asyncio.wait_for(waiting, HANG_S)

    assert asyncio.run(on_a_new_loop()) > 0
    assert not stranded.done()
    stranded.get_coro().close()  # what the old loop's shutdown would have done
    del stranded
    gc.collect()  # its "destroyed but pending" report goes to this test's captured log
