"""Effects under way in a worker's execution, which its SIGTERM lets finish first.

SIGTERM (a deploy, `docker stop`) hands a worker's run back (`runs/_signals.py`). Stopped
in the middle of an `@effect` call, the attempt may have reached its receiver, so it is
journaled `unknown` and the next worker blocks the run until a person resolves it: a
plain deploy would do what a crash does. So the attempts under way are let finish (their
outcomes journaled, replays for the next worker), no new one starts, and the run is
stopped right after.

The worker opens an `Execution` around each run of a graph (a context variable: the
graph's tasks and threads get copies of the context, which hold the same object); only
attempts made inside it are counted, and only they are held back once it is stopping.
Ctrl-C is not held: a person who interrupts a process means it. A hung receiver holds the
stop until the process is killed, which leaves the attempt as a crash would.

Two shapes, one per flavour of worker:
- a sync worker's handler runs in the main thread, between the graph's bytecodes: if that
  thread is inside an attempt, it leaves its stop (raising `WorkerTerminated`) to the end
  of the attempt (`stop_this_thread_after_effects`); an attempt about to start in another
  thread (a parallel branch) raises it instead (`effects_may_start`);
- an async worker's handler cancels the graph's task once no attempt of the execution is
  under way (`Execution.call_when_ended`); an attempt about to start waits for that cancel
  (`aeffects_may_start`; in a sync node's thread, until the execution has ended), so
  nothing is claimed that would not be attempted.

An effect called inside another's running attempt (its body calls it) still starts: the
outer attempt is let finish (`effects/_arunner.py` `_amay_start`).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

__all__ = [
    "Execution",
    "aeffects_may_start",
    "effect_under_way",
    "effects_may_start",
    "execution",
    "stop_this_thread_after_effects",
]


class Execution:
    """One execution of a run's graph by a worker: its attempts under way, and the stop
    SIGTERM asked for (`stop`: what a sync worker raises; None before SIGTERM)."""

    def __init__(self) -> None:
        self.under_way = 0
        self.stopping = False
        self.stop: Callable[[], None] | None = None
        self.ended = threading.Event()  # the graph has stopped (`execution()` set it)
        self._lock = threading.Lock()
        self._when_ended: list[Callable[[], None]] = []

    def stop_new_attempts(self, stop: Callable[[], None] | None = None) -> None:
        """From now on no attempt starts: `stop()` is raised where one would (sync), or
        the attempt waits for the graph's cancel (async, `stop` None)."""
        self.stop = stop
        self.stopping = True

    def call_when_ended(self, callback: Callable[[], None]) -> int:
        """If attempts are under way, `callback()` as the last one ends (in the thread
        that ends it), and their number; else 0, and nothing is called."""
        with self._lock:
            if self.under_way:
                self._when_ended.append(callback)
            return self.under_way

    def attempt_started(self) -> None:
        with self._lock:
            self.under_way += 1

    def attempt_ended(self) -> None:
        with self._lock:
            self.under_way -= 1
            ended = self._when_ended[:] if self.under_way == 0 else []
            if ended:
                self._when_ended.clear()
        for callback in ended:
            callback()


_execution: ContextVar[Execution | None] = ContextVar("langgraph_durable_execution", default=None)


@contextmanager
def execution() -> Iterator[Execution]:
    """Around one execution of a run's graph (its task or thread, and what it starts)."""
    found = Execution()
    token = _execution.set(found)
    try:
        yield found
    finally:
        _execution.reset(token)


class _ThisThread(threading.local):
    depth = 0
    stop: Callable[[], None] | None = None


_this_thread = _ThisThread()


class _UnderWay:
    """The context manager of `effect_under_way` (a class: no generator per call).

    The thread's depth goes up first and down last: a signal handler that lands between
    the two steps finds the thread inside the attempt and leaves its stop to the end, so
    the execution's count is never left counting an attempt that ended."""

    def __enter__(self) -> None:
        _this_thread.depth += 1
        found = _execution.get()
        if found is not None:
            found.attempt_started()

    def __exit__(self, *exc_info: object) -> None:
        found = _execution.get()
        if found is not None:
            found.attempt_ended()
        _this_thread.depth -= 1
        stop = _this_thread.stop
        if stop is not None and _this_thread.depth == 0:
            _this_thread.stop = None
            stop()  # raises: the stop a signal handler left to the end of the attempt


_UNDER_WAY = _UnderWay()


def effect_under_way() -> _UnderWay:
    """Around one attempt of an effect: from just before its receiver is called until
    its outcome is journaled."""
    return _UNDER_WAY


def effects_may_start() -> None:
    """Before an attempt is claimed: raise the execution's stop if SIGTERM asked for one
    (a sync worker); nothing is claimed, so nothing is left to reconcile. A sync node of
    an async worker's graph (LangGraph runs it in a thread) waits for the graph's cancel
    instead, which its thread does not see, and then ends the node: it went on starting
    calls, and the one under way as the process exited was left for a person."""
    found = _execution.get()
    if found is None or not found.stopping:
        return
    if found.stop is not None:
        found.stop()
    try:
        asyncio.get_running_loop()
    except RuntimeError:  # a thread of the loop's pool: wait until the graph has stopped
        found.ended.wait()
    # On the loop's own thread (a sync effect called from an async node) nothing may wait:
    # the loop would never run the cancel that ends the execution. The worker takes what
    # the graph ends with, once SIGTERM came, for the hand-back (`AsyncTermination`).
    raise asyncio.CancelledError()  # its result is not looked at


async def aeffects_may_start() -> None:
    """Before an attempt is claimed in an async execution that SIGTERM is stopping: wait
    for the graph's cancel, which comes once the attempts under way have ended."""
    found = _execution.get()
    if found is not None and found.stopping:
        await asyncio.Event().wait()  # ended by the cancel: nothing was claimed


def stop_this_thread_after_effects(stop: Callable[[], None]) -> bool:
    """For a signal handler, in the thread it interrupted: False if no attempt is under
    way in it (the handler stops it now); else True, and `stop` (which raises) runs as
    the attempt ends."""
    if _this_thread.depth == 0:
        return False
    _this_thread.stop = stop
    return True
