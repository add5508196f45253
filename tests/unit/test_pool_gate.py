"""The queue in front of an async pool (`_db/gate.py`), without a database.

The gate only reads the pool's `max_size`, so a stand-in with that attribute is the pool
here; `tests/integration` runs every async saver through the real one. Nothing waits on
the clock except the timeout test, whose borrower must time out (its bound is 0).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import pytest
from psycopg_pool import PoolTimeout

from langgraph_durable._db.gate import AsyncPoolGate, PoolGate

HANG_S = 60.0
"""Bounds waits that only guard against a hang; a correct run never waits it out."""


@dataclass(eq=False)
class Sized:
    max_size: int


async def _started(task: asyncio.Task[float]) -> None:
    """Lets `task` run up to its first wait."""
    for _ in range(3):
        await asyncio.sleep(0)
    assert not task.done()


async def test_at_most_max_size_borrowers_pass_and_the_rest_go_in_order() -> None:
    gate = AsyncPoolGate(Sized(max_size=2))
    assert await gate.enter(HANG_S) == HANG_S
    assert await gate.enter(HANG_S) == HANG_S
    order: list[int] = []

    async def borrower(n: int) -> float:
        left = await gate.enter(HANG_S)
        order.append(n)
        return left

    waiting = [asyncio.create_task(borrower(n)) for n in range(3)]
    for task in waiting:
        await _started(task)
    gate.leave()
    await asyncio.wait_for(waiting[0], HANG_S)
    assert order == [0]
    assert not waiting[1].done()
    gate.leave()
    gate.leave()
    await asyncio.wait_for(asyncio.gather(*waiting), HANG_S)
    assert order == [0, 1, 2]
    assert all(0 < task.result() <= HANG_S for task in waiting)


async def test_a_borrower_that_waits_out_the_timeout_gets_pool_timeout() -> None:
    gate = AsyncPoolGate(Sized(max_size=1))
    await gate.enter(HANG_S)
    with pytest.raises(PoolTimeout):
        await gate.enter(0.0)
    gate.leave()  # the one that passed; the timed-out one left no trace
    assert await gate.enter(HANG_S) == HANG_S


async def test_a_cancelled_borrower_passes_its_turn_on() -> None:
    gate = AsyncPoolGate(Sized(max_size=1))
    await gate.enter(HANG_S)
    first = asyncio.create_task(gate.enter(HANG_S))
    second = asyncio.create_task(gate.enter(HANG_S))
    await _started(first)
    await _started(second)
    # The turn is handed to `first`, which is cancelled before it resumes: it must pass
    # the turn to `second` instead of keeping it.
    gate.leave()
    first.cancel()
    with pytest.raises(asyncio.CancelledError):
        await first
    assert await asyncio.wait_for(second, HANG_S) > 0
    gate.leave()
    assert await gate.enter(HANG_S) == HANG_S  # nothing leaked: the gate is free again


async def test_a_borrower_cancelled_while_queued_leaves_the_queue() -> None:
    gate = AsyncPoolGate(Sized(max_size=1))
    await gate.enter(HANG_S)
    queued = asyncio.create_task(gate.enter(HANG_S))
    await _started(queued)
    queued.cancel()
    with pytest.raises(asyncio.CancelledError):
        await queued
    gate.leave()
    assert await gate.enter(HANG_S) == HANG_S


async def test_a_pool_grown_meanwhile_lets_more_through() -> None:
    pool = Sized(max_size=1)
    gate = AsyncPoolGate(pool)
    await gate.enter(HANG_S)
    queued = [asyncio.create_task(gate.enter(HANG_S)) for _ in range(2)]
    for task in queued:
        await _started(task)
    pool.max_size = 3
    gate.leave()
    await asyncio.wait_for(asyncio.gather(*queued), HANG_S)


def test_every_source_on_a_pool_shares_its_gate_and_the_sync_gate_passes_all() -> None:
    pool, other = Sized(max_size=1), Sized(max_size=1)
    assert AsyncPoolGate.of(pool) is AsyncPoolGate.of(pool)
    assert AsyncPoolGate.of(pool) is not AsyncPoolGate.of(other)
    gate = PoolGate.of(pool)
    assert [gate.enter(5.0) for _ in range(10)] == [5.0] * 10
    gate.leave()
