"""SIGTERM hands a worker's run back: what `run_forever` installs, in both flavours.

Python's default SIGTERM ends the process at once, so a worker stopped that way (a deploy,
`docker stop`, Kubernetes scaling down) leaves its run `running` until its lease runs out,
and that execution uses an attempt up. `run_forever` installs a handler instead that calls
the worker's `stop()` and stops the execution under way, so the run goes back to the queue
at once, its attempt given back, and `run_forever` returns.

Only when it is free to: in the main thread (the only one signals reach), and while
SIGTERM has Python's default disposition; a handler of the application's own is left
alone. The previous disposition comes back when `run_forever` returns.

The execution is stopped differently by flavour, so the pair is written by hand here
(like `_db/heartbeat.py`), not generated: the sync handler raises `WorkerTerminated` in
the main thread, which runs the graph, but only while the graph runs (never while the
worker records a run's outcome); the async handler, called by the event loop, cancels the
task the graph runs in, and never the worker's own.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import threading
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any, TypeVar

from langgraph_durable._inflight import Execution, execution, stop_this_thread_after_effects
from langgraph_durable.embedded import stops_servers_on_sigterm

__all__ = ["AsyncTermination", "Termination", "WorkerTerminated"]

logger = logging.getLogger("langgraph_durable.runs")

T = TypeVar("T")


class WorkerTerminated(KeyboardInterrupt):
    """The worker got SIGTERM while it ran a graph: the run is handed back.

    A KeyboardInterrupt, as Ctrl-C is: nodes and LangGraph's retries (which catch
    Exception) let it through, and what must finish though the process is interrupted
    finishes for it too (an effect's result in hand is stored, `_db/uninterrupted.py`)."""


def _terminate() -> None:
    raise WorkerTerminated()


def _free_to_install() -> bool:
    """Whether SIGTERM may be taken: in the main thread, and still Python's default, or
    the embedded Postgres's (which only stops its servers; they stop at exit anyway)."""
    if threading.current_thread() is not threading.main_thread():
        return False
    current = signal.getsignal(signal.SIGTERM)
    return current is signal.SIG_DFL or stops_servers_on_sigterm(current)


class Termination:
    """SIGTERM for a sync worker: `stop` it, and end the graph it runs with
    `WorkerTerminated`."""

    def __init__(self, stop: Callable[[], None]) -> None:
        self._stop = stop
        self.requested = False
        self._in_graph = False
        self._execution: Execution | None = None

    @contextmanager
    def installed(self, enabled: bool) -> Iterator[None]:
        """SIGTERM handled while the block runs, if `enabled` and free to."""
        if not enabled or not _free_to_install():
            yield
            return
        previous = signal.signal(signal.SIGTERM, self._handle)
        try:
            yield
        finally:
            signal.signal(signal.SIGTERM, previous)

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self._stop()
        self.requested = True
        if self._in_graph:
            self._in_graph = False  # a second SIGTERM does not break the hand-back
            if self._execution is not None:  # no new effect attempt, in any thread
                self._execution.stop_new_attempts(_terminate)
            logger.info("SIGTERM: effect calls under way finish first, then the run stops")
            if stop_this_thread_after_effects(_terminate):
                return
            raise WorkerTerminated()

    def interruptible(self, body: Callable[[], T]) -> T:
        """`body()` (running a run's graph), ended by SIGTERM with `WorkerTerminated`; at
        once if SIGTERM came while the run was being taken."""
        if self.requested:
            raise WorkerTerminated()
        with execution() as found:
            self._execution = found
            self._in_graph = True
            try:
                return body()
            finally:
                self._in_graph = False
                self._execution = None
                found.ended.set()


class AsyncTermination:
    """SIGTERM for an async worker: `stop` it, and cancel the task its graph runs in."""

    def __init__(self, stop: Callable[[], None]) -> None:
        self._stop = stop
        self.requested = False
        self._graph: asyncio.Future[Any] | None = None
        self._execution: Execution | None = None
        self._cancelled: asyncio.Future[Any] | None = None

    @contextmanager
    def installed(self, enabled: bool) -> Iterator[None]:
        """SIGTERM handled by the running loop while the block runs, if `enabled` and
        free to."""
        if not enabled or not _free_to_install():
            yield
            return
        loop = asyncio.get_running_loop()
        previous = signal.getsignal(signal.SIGTERM)
        try:
            loop.add_signal_handler(signal.SIGTERM, self._handle)
        except (NotImplementedError, RuntimeError):  # Windows; a loop that cannot
            yield
            return
        try:
            yield
        finally:
            loop.remove_signal_handler(signal.SIGTERM)  # which sets SIG_DFL: put back
            signal.signal(signal.SIGTERM, previous)  # the embedded Postgres's, if it was

    def _handle(self) -> None:
        self._stop()
        self.requested = True
        if self._graph is not None and self._execution is not None:
            self._execution.stop_new_attempts()  # they wait for the cancel instead
            self._cancel_after_effects(self._graph, self._execution, asyncio.get_running_loop())

    def _cancel_after_effects(
        self, graph: asyncio.Future[Any], found: Execution, loop: Any
    ) -> None:
        """Cancel `graph`, once no effect call of its execution is under way (a cancel
        would land in it): looked at again, in the loop, as the last one ends."""
        if self._graph is not graph or graph.done():
            return  # finished meanwhile: nothing to stop

        def again() -> None:  # in the thread that ended the last effect call
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                loop.call_soon_threadsafe(self._cancel_after_effects, graph, found, loop)

        under_way = found.call_when_ended(again)
        if under_way:
            logger.info("SIGTERM: %d effect call(s) under way finish first", under_way)
            return
        self._cancelled = graph
        graph.cancel()

    async def interruptible(self, body: Callable[[], Awaitable[T]]) -> T:
        """`await body()` (running a run's graph) in a task of its own, which SIGTERM
        cancels: the worker's task is never cancelled, so it records the hand-back.
        Ends with `WorkerTerminated`; at once if SIGTERM came while the run was being
        taken."""
        if self.requested:
            raise WorkerTerminated()
        with execution() as found:  # the graph's task takes a copy of this context
            graph: asyncio.Future[T] = asyncio.ensure_future(body())
        self._graph, self._execution = graph, found
        try:
            return await graph
        except BaseException:
            # Whatever the graph ended with once SIGTERM came (cancelled, or a call it
            # stopped from starting; LangGraph may turn a cancellation into an error of its
            # own), unless the worker's own task is being cancelled.
            stopped = self._cancelled is graph or found.stopping
            if stopped and not _cancelling_current_task():
                raise WorkerTerminated() from None
            raise
        finally:
            self._graph, self._execution = None, None
            found.ended.set()  # a sync node's thread waiting to start a call ends now


def _cancelling_current_task() -> bool:
    """Whether the current task (the worker's) is being cancelled itself: then the
    cancellation is passed on, not taken for SIGTERM's (Python 3.11+; on 3.10 it cannot
    be told, and SIGTERM's is assumed)."""
    task = asyncio.current_task()
    cancelling = getattr(task, "cancelling", None)
    return bool(cancelling()) if cancelling is not None else False
