"""Keeping a lease alive while a long call runs: effect attempts now, runs later.

Without it, a call that outlives its lease looks dead to workers on other hosts. The
heartbeat calls `beat` every `every` seconds until the call returns or raises. A failed
beat is logged, not raised: the call itself is what matters, and a lost lease is handled
safely by whoever reads it.

Almost every call ends long before its first beat, so arming a heartbeat must cost next to
nothing: a thread started per call doubled the cost of an `@effect` call. The sync flavour
shares one daemon thread per process that sleeps until the earliest beat is due; the async
flavour arms a `call_later` timer on the running loop. A hand-written pair: waiting is
written differently for asyncio and for threads.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import logging
import threading
import time
from collections.abc import Awaitable, Callable

__all__ = ["AsyncHeartbeat", "Heartbeat"]

logger = logging.getLogger("langgraph_durable.leases")


class AsyncHeartbeat:
    """Calls `beat` from the running loop every `every` seconds while the body runs.

    Args:
        beat: Extends the lease (one statement); its errors are logged.
        every: Seconds between beats (a third of the lease is usual).
        what: What the lease is for, in log messages.
    """

    def __init__(self, beat: Callable[[], Awaitable[object]], every: float, what: str) -> None:
        self._beat_once, self._every, self._what = beat, every, what
        self._timer: asyncio.TimerHandle | None = None
        self._beating: asyncio.Task[None] | None = None
        self._stopped = False

    def _arm(self) -> None:
        self._timer = asyncio.get_running_loop().call_later(self._every, self._fire)

    def _fire(self) -> None:
        if not self._stopped:
            self._beating = asyncio.get_running_loop().create_task(self._beat())

    async def _beat(self) -> None:
        try:
            await self._beat_once()
        except Exception as exc:
            # Also a beat that turned the cancellation from `__aexit__` into an error of
            # its own: once stopped, it is not armed again (it would beat on after the
            # call, holding it).
            logger.warning("could not extend the lease of %s: %s", self._what, exc)
        if not self._stopped:
            self._arm()

    def running(self) -> AsyncHeartbeat:
        """Beats while the `async with` block runs (this object is the context manager:
        no generator per call)."""
        return self

    async def __aenter__(self) -> None:
        self._arm()

    async def __aexit__(self, *exc_info: object) -> None:
        self._stopped = True
        if self._timer is not None:
            self._timer.cancel()
        if self._beating is not None and not self._beating.done():
            self._beating.cancel()
            # `wait`, not `await` of the task: its own cancellation is not raised here, and
            # a cancel of the caller meanwhile is (a suppressed CancelledError would swallow
            # both).
            await asyncio.wait({self._beating})


class _Beats:
    """One daemon thread per process that beats for every running sync heartbeat."""

    def __init__(self) -> None:
        self._lock = threading.RLock()  # entered directly: no Python-level __enter__
        self._changed = threading.Condition(self._lock)
        self._due: list[tuple[float, int, Heartbeat]] = []
        self._order = itertools.count()
        self._thread: threading.Thread | None = None
        self._stopped_in_queue = 0

    def schedule(self, heartbeat: Heartbeat, delay: float) -> None:
        with self._lock:
            entry = (time.monotonic() + delay, next(self._order), heartbeat)
            heapq.heappush(self._due, entry)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="langgraph-durable-leases", daemon=True
                )
                self._thread.start()
            if self._due[0] is entry:
                # Only a new earliest beat changes when the thread must wake; with one
                # lease length per process that is rare, and a wake-up per call is not.
                self._changed.notify()

    def stopped(self) -> None:
        """A heartbeat stopped; its entry waits in the queue until due, unless many do."""
        with self._lock:
            self._stopped_in_queue += 1
            if self._stopped_in_queue > 1024 and 2 * self._stopped_in_queue > len(self._due):
                self._due = [entry for entry in self._due if not entry[2].stopped]
                heapq.heapify(self._due)
                self._stopped_in_queue = 0

    def _run(self) -> None:
        while True:
            with self._lock:
                while not self._due or self._due[0][0] > time.monotonic():
                    timeout = self._due[0][0] - time.monotonic() if self._due else None
                    self._changed.wait(timeout)
                _, _, heartbeat = heapq.heappop(self._due)
            if heartbeat.stopped:
                with self._lock:
                    self._stopped_in_queue = max(0, self._stopped_in_queue - 1)
                continue
            heartbeat.beat()
            if not heartbeat.stopped:
                self.schedule(heartbeat, heartbeat.interval)


_BEATS = _Beats()


class Heartbeat:
    """Calls `beat` from the shared lease thread every `every` seconds while the body runs."""

    def __init__(self, beat: Callable[[], object], every: float, what: str) -> None:
        self._beat_once: Callable[[], object] | None = beat
        self._what = what
        self.interval = every
        self.stopped = False

    def beat(self) -> None:
        beat_once = self._beat_once
        if beat_once is None:  # stopped meanwhile
            return
        try:
            beat_once()
        except Exception as exc:
            logger.warning("could not extend the lease of %s: %s", self._what, exc)

    def running(self) -> Heartbeat:
        """Beats while the `with` block runs (this object is the context manager: no
        generator per call)."""
        return self

    def __enter__(self) -> None:
        _BEATS.schedule(self, self.interval)

    def __exit__(self, *exc_info: object) -> None:
        # A beat under way finishes; it only ever extends this attempt's own lease, and
        # not once the attempt has ended. The entry stays queued until it is due or swept
        # (`_Beats.stopped`), up to a third of a lease: it lets go of `beat` now, which
        # holds the call (an effect's arguments, a model call's prompt) and its journal.
        self.stopped = True
        self._beat_once = None
        _BEATS.stopped()
