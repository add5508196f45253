"""Finishing a write that must not be left half done, though the caller is interrupted.

An effect whose receiver has acted has its result in hand: storing it is the one thing
left. A cancel (asyncio) or a Ctrl-C (threads) arriving then would leave the attempt
`running` under this process's lease: whoever runs the thread next waits for that lease
to end, then finds the outcome unknown, and a retry may act again. So the write is
finished first and the interruption goes on after it. A hand-written pair: asyncio can
shield the write's task; a thread can only run an interrupted write once more, which is
safe for a write that is conditional on the state it moves from.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

__all__ = ["afinish_despite_cancel", "finish_despite_interrupt"]

T = TypeVar("T")


async def afinish_despite_cancel(operation: Callable[[], Awaitable[T]]) -> T:
    """`await operation()`, to its end even if the calling task is cancelled meanwhile;
    the cancel is raised after it (chained to the operation's own error, if it failed),
    also when it lands after the operation ended but before the caller went on."""
    task = asyncio.ensure_future(operation())
    cancelled: asyncio.CancelledError | None = None
    while not task.done():
        try:
            await asyncio.shield(task)
        except asyncio.CancelledError as exc:
            cancelled = exc  # ours, or the operation's own: told apart below
    if cancelled is not None and not task.cancelled():
        error = task.exception()
        if error is not None:
            raise cancelled from error
        raise cancelled
    return task.result()


def finish_despite_interrupt(operation: Callable[[], T]) -> T:
    """`operation()`; if a KeyboardInterrupt stops it, once more to its end, then the
    interrupt is raised. `operation` must be safe to run again (a conditional write: the
    second run finds the first's work done and changes nothing)."""
    try:
        return operation()
    except KeyboardInterrupt:
        operation()
        raise
