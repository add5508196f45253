"""`afinish_despite_cancel`: the write finishes, and the caller's cancel is never lost."""

from __future__ import annotations

import asyncio

import pytest

from langgraph_durable._db import afinish_despite_cancel


async def test_a_cancel_during_the_write_comes_after_it() -> None:
    stored: list[str] = []
    started = asyncio.Event()

    async def write() -> str:
        started.set()
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        stored.append("result")
        return "ok"

    caller = asyncio.ensure_future(afinish_despite_cancel(write))
    await started.wait()
    caller.cancel()
    with pytest.raises(asyncio.CancelledError):
        await caller
    assert stored == ["result"]


async def test_a_cancel_landing_after_the_write_ended_is_not_swallowed() -> None:
    loop = asyncio.get_running_loop()
    done = loop.create_future()

    async def write() -> str:
        await done
        return "ok"

    caller = asyncio.ensure_future(afinish_despite_cancel(write))
    await asyncio.sleep(0)
    done.set_result(None)  # the write ends; the caller has not gone on yet
    await asyncio.sleep(0)
    caller.cancel()
    with pytest.raises(asyncio.CancelledError):
        await caller


async def test_a_failed_write_under_a_cancel_raises_the_cancel_chained_to_it() -> None:
    started = asyncio.Event()

    async def write() -> str:
        started.set()
        await asyncio.sleep(0)
        raise ConnectionError("the database went away")

    caller = asyncio.ensure_future(afinish_despite_cancel(write))
    await started.wait()
    caller.cancel()
    with pytest.raises(asyncio.CancelledError) as raised:
        await caller
    assert isinstance(raised.value.__cause__, ConnectionError)


async def test_without_a_cancel_the_result_or_the_error_comes_back() -> None:
    async def ok() -> int:
        return 7

    async def failing() -> int:
        raise ValueError("no")

    assert await afinish_despite_cancel(ok) == 7
    with pytest.raises(ValueError, match="no"):
        await afinish_despite_cancel(failing)


def test_sigterm_under_a_worker_lets_a_result_in_hand_be_stored() -> None:
    """`WorkerTerminated` (SIGTERM under `run_forever`) interrupts like Ctrl-C: the write
    runs once more to its end, then the termination goes on."""
    from langgraph_durable._db import finish_despite_interrupt
    from langgraph_durable.runs._signals import WorkerTerminated

    stored: list[str] = []

    def store() -> None:
        if not stored:
            stored.append("interrupted")
            raise WorkerTerminated()
        stored.append("stored")

    with pytest.raises(WorkerTerminated):
        finish_despite_interrupt(store)
    assert stored == ["interrupted", "stored"]
