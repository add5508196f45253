"""Writes of finished tasks parked for a moment, so the next checkpoint can carry them.

Storing a step used to take two commits in series: the finished task's writes
(`put_writes`), then the checkpoint that moves past them (`put`), which must wait for those
writes (invariant I4). LangGraph submits that `put` a fraction of a millisecond after the
writes, so `put_writes` parks regular writes here for up to `linger` seconds. A `put` whose
parent (or own) checkpoint they belong to takes them into its own statement: one commit per
step, and a reader sees the checkpoint and those writes together or not at all.

The protocol, per (thread, namespace, checkpoint) key:

- A `put_writes` call counts itself as busy *before* it serializes, so a `put` that starts
  meanwhile waits for it instead of committing ahead of it.
- It then parks and returns, or, when parking is not allowed, stores its writes on its own
  ("alone") and returns once they are committed; a `put` waits until no call for its keys
  is busy, then takes what is parked.
- The writer does not wait for the put: a waiting writer cost every step a wake-up (a
  thread switch, or a future and a timer on the loop). What it did after its wait, the
  parking does: a sweep (a thread, or one timer on the loop) stores alone the writes no put
  took in time; writes a failed or cancelled put took are stored alone before it raises;
  writes that end their step (an error, an interrupt) store the writes parked for the same
  checkpoint with their own before they return, and later writes for it do not park, as
  no put will follow; a read of a thread (`get_tuple`, `list`) stores its parked writes
  first, and `flush_writes()` (called when `from_conn_string` closes its pool) all of
  them. So a run that has returned has stored every write of a step that ended in an
  error or an interrupt, and a reader sees what a writer handed over (a read also waits
  for its thread's writes being stored alone). Writes whose run ends without a checkpoint
  otherwise (a stream closed early, an invalid update, a subgraph's static interrupt
  beside a sibling task) are stored by the sweep within two waits, by the next read of
  their thread, or, for sync savers, at the process's normal exit.
- Writes no `put` takes in time are stored alone. Their thread then stops parking for its
  next `COLD_PUTS` checkpoints (any namespace: a subgraph's namespace changes every step),
  twice as many after each further timeout, until parked writes are taken again: when a
  `put` cannot follow soon (a fan-out wider than the executor, `max_concurrency=1`, a run
  that ends in an interrupt), the linger is paid a few times per thread, not per step.
- A `put` that comes for writes after they timed out shows that the wait, not the graph,
  was too short: with hundreds of runs on one event loop (or many threads on one GIL) the
  put follows its writes after a few milliseconds of other runs' work, not within the
  linger. The wait then grows to twice that delay (at most `MAX_WAIT_FACTOR` times the
  linger) and the thread is warm again; it shrinks back towards the linger while puts
  take their writes well within it. Without this, one late put made a run store every
  write alone, and each extra commit made the next put later still: throughput fell as
  concurrency rose.
- If the `put` that took writes fails or is cancelled, the writes are stored alone: they
  were valid, and the checkpoint's own error is the `put`'s to raise. They count as busy
  again before the put returns, so a `put` retried at once waits for them.
- If writes stored alone fail because the database is out of reach or timed out
  (`hand_to_put`), and a `put` for their key is already waiting for them, they are handed
  to that `put` instead of failing at once: it commits them with its checkpoint. Without
  this, a server back between the two let the `put` (and the rest of the run) commit
  while the writes' error was raised when the run ended: an error after every step had
  committed. Writes stored alone by the parking that fail otherwise are logged: their
  writer has returned, and the checkpoint that moves past them holds their results.

Two rules decide whether writes park, and they are named apart:

- `writes_may_wait(...)`: may *these writes* wait for a checkpoint at all? (the kind of
  writes, and where they come from);
- `_Registry.thread_is_warm(key)`: does *their thread* park now? (parking is on, and the
  thread is not cold after a timeout).

A `put` takes parked writes only through `carried_by_put(keys)`, a context manager that
settles them whatever happens to the put: committed, failed or cancelled. A hand-written
pair, like `_db/heartbeat.py`: waiting with a timeout is written differently for asyncio
and for threads.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import logging
import math
import threading
import time
import weakref
from collections.abc import Callable, Sequence, Set
from dataclasses import dataclass
from typing import Any, Protocol

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import WRITES_IDX_MAP

from langgraph_durable import _langgraph
from langgraph_durable._db import is_disconnect
from langgraph_durable.errors import DatabaseTimeoutError, DatabaseUnreachableError

__all__ = [
    "COLD_PUTS",
    "EVENTS_WAIT",
    "HANDOVER_WAIT",
    "MAX_WAIT_FACTOR",
    "AsyncWriteParking",
    "ParkedWrites",
    "StoreAlone",
    "WriteKey",
    "WriteParking",
    "writes_may_wait",
]

logger = logging.getLogger("langgraph_durable.checkpoint")

WriteKey = tuple[str, str, str]
"""(thread_id, checkpoint_ns, checkpoint_id) the writes belong to."""

Prepare = Callable[[], tuple[bool, dict[str, Any]]]
"""Serializes a call's writes: (whether they may park, the statement's parameters)."""

StoreAlone = Callable[[dict[str, Any]], Any]
"""Stores a call's writes in a statement of their own (a coroutine for asyncio)."""

COLD_PUTS = 64
"""Checkpoints of a thread whose writes store alone after its parked writes first timed
out; each further timeout doubles it, up to `_MAX_COLD_PUTS`."""

_MAX_COLD_PUTS = 4096

HANDOVER_WAIT = 5.0
"""Seconds failed writes wait for the waiting `put` to take them (it wakes at once; only a
`put` cancelled meanwhile leaves them), before their writer raises its error."""
MAX_WAIT_FACTOR = 25
"""How far the wait for a put may grow, in lingers (50 ms at the default 2 ms)."""

EVENTS_WAIT = 5.0
"""Seconds a step's `put` waits for the tasks of the checkpoint it moves past to take their
outbox events (`carried_by_put(events_pending=...)`). LangGraph submitted their writes
before the put; only writes that never come (a task whose writes were refused) let the
wait run out, and the put then goes on without them."""

SWEEPER_IDLE = 1.0
"""Seconds the sync sweeper thread waits with nothing parked before it ends."""

_IDLE_PAUSE_LINGERS = 25
"""The longest pause of the sync sweeper between looks while nothing is parked, in
lingers (50 ms at the default 2 ms)."""

_MAX_LATE_KEYS = 4096

_MAX_COLD_THREADS = 10_000
_PARKED, _TAKEN = "parked", "taken"


def _unstored(entry: ParkedWrites, exc: BaseException) -> None:
    """Logs writes the parking could not store. Their writer has returned: nobody to
    raise to. The checkpoint that moves past them holds their results; without one, their
    task runs again on resume."""
    logger.warning(
        "Writes of task %s (thread %s) could not be stored: %s",
        entry.params.get("task_id"),
        entry.key[0],
        exc,
    )


def _events_not_taken(key: WriteKey) -> None:
    logger.warning(
        "Checkpoint %s (thread %s) is stored without waiting longer for outbox events of "
        "the tasks before it: their writes did not come within %s s",
        key[2],
        key[0],
        EVENTS_WAIT,
    )


def in_thread(key: WriteKey, thread_id: str, checkpoint_ns: str | None) -> bool:
    """Whether `key` is of the thread, and of the namespace unless that is None."""
    return key[0] == thread_id and (checkpoint_ns is None or key[1] == checkpoint_ns)


def hand_to_put(exc: BaseException) -> bool:
    """Whether writes that failed on their own may still commit with a waiting `put`: the
    database was out of reach or cancelled a wait, nothing about the writes themselves."""
    if isinstance(exc, (DatabaseUnreachableError, DatabaseTimeoutError)):
        return True
    return is_disconnect(exc)


def writes_may_wait(
    config: RunnableConfig,
    writes: Sequence[tuple[str, Any]],
    delta_channels: Set[str],
    *,
    final_checkpoint: bool,
) -> bool:
    """Whether a task's writes may wait for the next checkpoint to carry them.

    Only writes of a running graph loop (its config carries LangGraph's runtime), whose
    checkpoint follows on another thread or task: `update_state` stores its writes and
    only then the checkpoint, and would wait out the linger. Not writes for a final
    checkpoint under durability="exit": no later checkpoint would take them. And not the
    writes LangGraph itself waits for before it goes on: special writes (errors,
    interrupts, resumes), the error-source marker an error handler waits for, and writes
    to a `DeltaChannel`, which the next checkpoint's save waits for. Parking those would
    add the linger to a step.
    """
    if final_checkpoint or not _langgraph.in_running_loop(config):
        return False
    return not any(
        channel in WRITES_IDX_MAP
        or channel == _langgraph.ERROR_SOURCE_NODE
        or channel in delta_channels
        for channel, _ in writes
    )


class _Signal(Protocol):
    """`_Released` or `_Settled`: set once the carrying `put` has finished."""

    def set(self) -> None: ...


@dataclass(eq=False)
class ParkedWrites:
    """One `put_writes` call's parameters, parked until a `put` takes them or time is up."""

    key: WriteKey
    params: dict[str, Any]
    stored: _Signal | None
    """Set once the carrying `put` has finished, for a writer that waits (threads, and
    writes handed over after failing alone); None for writes whose writer has returned."""
    store_alone: StoreAlone | None = None
    """How to store them on their own, for writes whose writer has returned: the parking
    does it when no `put` takes them in time, the `put` that took them failed, or their
    step ended in an error or an interrupt."""
    state: str = _PARKED
    error: BaseException | None = None
    counted_busy: bool = False
    """Set by a failed `put`: the writes count as busy until their writer stores them."""
    abandoned: bool = False
    """The writer was cancelled after a `put` took its writes: nobody stores them alone."""
    parked_at: float = 0.0
    """`time.monotonic()` when parked."""


class _Registry:
    """The bookkeeping both flavours share; callers hold the flavour's lock (threads)."""

    def __init__(self, linger: float, hand_over: bool = True) -> None:
        self.linger = linger
        self.hand_over = hand_over
        self.wait = linger
        """How long parked writes wait for their put now: the linger, or longer after
        puts came late."""
        self.parked: dict[WriteKey, list[ParkedWrites]] = {}
        self.busy: dict[WriteKey, int] = {}
        self.puts_waiting: dict[WriteKey, int] = {}
        self.cold: dict[str, int] = {}
        self.cold_period: dict[str, int] = {}
        self.late: dict[WriteKey, float] = {}
        """Keys whose writes timed out, with when they were parked."""
        self.ended: dict[WriteKey, None] = {}
        """Keys whose step ended in an error or an interrupt: no `put` will carry their
        writes, so later writes for them do not park (oldest first, bounded)."""

    def enter(self, key: WriteKey) -> None:
        self.busy[key] = self.busy.get(key, 0) + 1

    def leave(self, key: WriteKey) -> None:
        left = self.busy[key] - 1
        if left:
            self.busy[key] = left
        else:
            del self.busy[key]

    def none_busy(self, keys: Sequence[WriteKey]) -> bool:
        return not any(key in self.busy for key in keys)

    def put_waits(self, keys: Sequence[WriteKey], change: int) -> None:
        """Counts a `put` waiting (+1) or no longer waiting (-1) for busy writes of `keys`."""
        for key in keys:
            left = self.puts_waiting.get(key, 0) + change
            if left:
                self.puts_waiting[key] = left
            else:
                del self.puts_waiting[key]

    def may_hand_over(self, key: WriteKey, may_park: bool, exc: BaseException) -> bool:
        """Whether writes that failed alone go to a `put` waiting for them: writes that
        could have parked (a checkpoint may carry them), a failure of the database, not of
        the writes, and a saver whose checkpoints commit synchronously."""
        return self.hand_over and may_park and key in self.puts_waiting and hand_to_put(exc)

    def thread_is_warm(self, key: WriteKey) -> bool:
        """Parking is on, the thread of `key` is not cold after a timeout, and the step of
        `key` did not end in an error or an interrupt."""
        return self.linger > 0 and key[0] not in self.cold and key not in self.ended

    def park(
        self,
        key: WriteKey,
        params: dict[str, Any],
        stored: _Signal | None,
        store_alone: StoreAlone | None = None,
    ) -> ParkedWrites:
        """Moves a busy call's writes to the parked ones."""
        entry = ParkedWrites(key, params, stored, store_alone, parked_at=time.monotonic())
        self.parked.setdefault(key, []).append(entry)
        self.leave(key)
        return entry

    def unpark(self, key: WriteKey, entry: ParkedWrites, *, timed_out: bool) -> bool:
        """Takes `entry` back if no `put` has; True when its writes are the caller's again."""
        if entry.state != _PARKED:
            return False
        waiting = self.parked[key]
        waiting.remove(entry)
        if not waiting:
            del self.parked[key]
        if timed_out:
            if len(self.cold_period) >= _MAX_COLD_THREADS:
                self.cold.clear()
                self.cold_period.clear()
            period = self.cold_period.get(key[0])
            period = COLD_PUTS if period is None else min(2 * period, _MAX_COLD_PUTS)
            self.cold_period[key[0]] = self.cold[key[0]] = period
            if len(self.late) >= _MAX_LATE_KEYS:
                self.late.clear()
            self.late.setdefault(key, entry.parked_at)
        return True

    def linger_again(self, key: WriteKey) -> None:
        """The put storing checkpoint `key` has finished: writes parked for `key` meanwhile
        wait for the next put from now on (it follows this one), as if just parked."""
        entries = self.parked.get(key)
        if entries:
            now = time.monotonic()
            for entry in entries:
                entry.parked_at = now

    def take(self, keys: Sequence[WriteKey], fence_token: int | None = None) -> list[ParkedWrites]:
        """Takes the writes parked under `keys`, for one `put`; counts a cold thread down.

        Only writes parked under the put's own fencing token (or, like it, under none): the
        put's fence decides for everything it carries, so writes of another holder of the
        thread (a stale one, say) stay parked and are stored alone, behind their own fence.
        """
        thread = keys[0][0]
        now = time.monotonic()
        if self.late:
            self._came_late(thread, keys, now)
        left = self.cold.get(thread)
        if left is not None:
            if left <= 1:
                del self.cold[thread]
            else:
                self.cold[thread] = left - 1
        taken: list[ParkedWrites] = []
        for key in keys:
            entries = self.parked.pop(key, None)
            if not entries:
                continue
            others = [e for e in entries if e.params.get("fence_token") != fence_token]
            if others:
                self.parked[key] = others
            taken += [e for e in entries if e.params.get("fence_token") == fence_token]
        for entry in taken:
            entry.state = _TAKEN
        if taken:
            self.cold_period.pop(thread, None)  # parking works for this thread again
            if self.wait > self.linger and now - taken[0].parked_at < self.wait / 4:
                self.wait = max(self.linger, self.wait * 0.99)
        return taken

    def _came_late(self, thread: str, keys: Sequence[WriteKey], now: float) -> None:
        """A put for writes that timed out: wait longer from now on; the thread is warm."""
        for key in keys:
            parked_at = self.late.pop(key, None)
            if parked_at is None:
                continue
            ceiling = self.linger * MAX_WAIT_FACTOR
            delay = now - parked_at
            if delay <= ceiling:
                self.wait = min(ceiling, max(self.wait, 2 * delay))
                self.cold.pop(thread, None)
                self.cold_period.pop(thread, None)

    def settle(
        self, taken: Sequence[ParkedWrites], error: BaseException | None
    ) -> list[ParkedWrites]:
        """Tells the parked callers that the `put` carrying their writes committed or failed.

        On failure the writes count as busy before their writers wake, as they are to be
        stored alone: a `put` that starts meanwhile waits for them. Every entry learns the
        outcome before anything that could fail, so that no writer of a failed put takes
        its writes for stored; and every writer wakes, once, even if counting failed (a
        `_Released` signal refuses a second `set`).

        Returns the writes of a failed put whose writers have returned (`store_alone`):
        counted busy, for the caller to store alone.
        """
        for entry in taken:
            entry.error = error
        orphans: list[ParkedWrites] = []
        try:
            if error is not None:
                for entry in taken:
                    if not entry.abandoned:
                        self.enter(entry.key)
                        entry.counted_busy = True
                        if entry.stored is None:
                            orphans.append(entry)
        finally:
            for entry in taken:
                if entry.stored is not None:
                    entry.stored.set()
        return orphans

    def expired(
        self, now: float, still_storing: Set[WriteKey], *, timed_out: bool = True
    ) -> list[ParkedWrites]:
        """Parked writes whose writer has returned and that waited `wait` in vain, unparked
        as timed out (their thread goes cold; not with `timed_out=False`, for a flush) and
        counted busy, for the caller to store alone. Not those of a checkpoint still being
        stored (`still_storing`): the put that takes them follows it."""
        found = [
            entry
            for entries in self.parked.values()
            for entry in entries
            if entry.stored is None
            and now - entry.parked_at >= self.wait
            and entry.key not in still_storing
        ]
        for entry in found:
            self.unpark(entry.key, entry, timed_out=timed_out)
            self.enter(entry.key)
        return found

    def end_step(self, key: WriteKey) -> list[ParkedWrites]:
        """An error or an interrupt ended the step of checkpoint `key`: no `put` will carry
        its writes. Takes the writes parked there (any fencing token), counted busy, for
        the caller to store alone, and keeps later writes for `key` from parking."""
        if len(self.ended) >= _MAX_LATE_KEYS:
            self.ended.clear()
        self.ended[key] = None
        return self._take_returned([key])

    def of_thread(self, thread_id: str, checkpoint_ns: str | None) -> list[ParkedWrites]:
        """Takes every parked write of a thread (of one namespace, unless None) whose
        writer has returned, counted busy, for the caller to store alone (a read must see
        them). A subgraph's read leaves its parent's writes to the parent's next put."""
        return self._take_returned(
            [key for key in self.parked if in_thread(key, thread_id, checkpoint_ns)]
        )

    def _take_returned(self, keys: Sequence[WriteKey]) -> list[ParkedWrites]:
        """Takes the writes parked under `keys` whose writer has returned, counted busy.
        Writes handed over by a writer that waits (`stored` set) stay for their put."""
        found: list[ParkedWrites] = []
        for key in keys:
            entries = self.parked.pop(key, None)
            if not entries:
                continue
            waited_for = [entry for entry in entries if entry.stored is not None]
            if waited_for:
                self.parked[key] = waited_for
            for entry in entries:
                if entry.stored is None:
                    entry.state = _TAKEN
                    self.enter(key)
                    found.append(entry)
        return found

    def parked_in_thread(self, thread_id: str, checkpoint_ns: str | None) -> bool:
        """Whether writes of the thread (one namespace, unless None) whose writer has
        returned wait parked (what `of_thread` would take)."""
        return any(
            entry.stored is None
            for key, entries in self.parked.items()
            if in_thread(key, thread_id, checkpoint_ns)
            for entry in entries
        )

    def busy_in_thread(self, thread_id: str, checkpoint_ns: str | None) -> bool:
        """Whether a call for the thread (one namespace, unless None) is busy."""
        return any(in_thread(key, thread_id, checkpoint_ns) for key in self.busy)

    def hand_back(self, entry: ParkedWrites, exc: BaseException) -> bool:
        """Writes whose writer has returned failed alone (`exc`): if a put waits for them
        and the database was at fault, they are parked again for that put, which commits
        them with its checkpoint or fails and stores them alone again (their busy count
        moves to the entry). Whether they were."""
        if not self.may_hand_over(entry.key, True, exc):
            return False
        self.park(entry.key, entry.params, None, entry.store_alone)
        return True

    def count_failed(self, entry: ParkedWrites) -> None:
        """The writer of writes a failed `put` took, woken to store them alone: they count
        as busy until it has (`settle` counted them, unless counting failed there)."""
        if not entry.counted_busy:
            self.enter(entry.key)
            entry.counted_busy = True

    def abandon(self, entry: ParkedWrites) -> None:
        """The writer of taken writes was cancelled; drop what a failed put counted for it."""
        entry.abandoned = True
        if entry.counted_busy:
            entry.counted_busy = False
            self.leave(entry.key)


CONGESTED_TURNS = 8
"""Loop iterations parked writes wait on after their timeout if it fired late: on a loop
running hundreds of graphs one iteration takes longer than the linger, and the put that
follows the writes is several iterations away (LangGraph hops through a few awaits between
a task's writes and the next checkpoint). When the sweep fires more than a whole wait
late, it looks again for up to this many iterations before it stores anything alone; on a
loop that keeps time, nothing changes."""


def _wake(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


class _Settled:
    """The asyncio signal a parked write waits on: set once the carrying `put` has finished.

    `asyncio.wait_for(event.wait(), timeout)` runs the wait in a task of its own, with
    two more futures; a parked write paid that on every step. Here a timed wait costs one
    future and one timer handle (a loop of 20,000 waits: 16-18 against 27-36 us each).
    A wait that is cancelled leaves the signal as it was.
    """

    __slots__ = ("_is_set", "_waiters")

    def __init__(self) -> None:
        self._is_set = False
        self._waiters: list[asyncio.Future[None]] = []

    def set(self) -> None:
        self._is_set = True
        for waiter in self._waiters:
            _wake(waiter)

    async def wait(self, timeout: float | None = None) -> bool:
        """Waits until set, at most `timeout` seconds; whether it is set."""
        if self._is_set:
            return True
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[None] = loop.create_future()
        self._waiters.append(waiter)
        timer = None if timeout is None else loop.call_later(timeout, _wake, waiter)
        try:
            await waiter
        finally:
            if timer is not None:
                timer.cancel()
            self._waiters.remove(waiter)
        return self._is_set


class AsyncWriteParking:
    """Parking for `AsyncDurablePostgresSaver`; every call runs on the saver's loop.

    On one loop the registry needs no lock: nothing awaits between reading and changing it.
    Waiters are woken through an event that is swapped on every change, so waking them
    never waits for a lock (a cancelled caller can always leave).

    A writer whose writes park returns at once: waiting for the put cost each step a
    future, a timer and a task switch. What the writer did after its wait, the parking
    does here, on the loop: a sweep stores alone the writes no put took within the wait
    (one timer for all parked writes, not one per write); the put that took writes and
    failed stores them alone before it raises; a write that ends its step (an error, an
    interrupt) stores the writes parked there with its own, before it returns, as no put
    will follow; a read of a thread (`flush_thread`) and `flush` store what is parked before they go
    on. So when a run has returned, every write of a step that ended in an error or an
    interrupt is stored, as before.
    """

    def __init__(self, linger: float, *, hand_over: bool = True) -> None:
        self._registry = _Registry(linger, hand_over)
        self._changed = asyncio.Event()
        self._listeners = 0
        """Calls waiting on `_changed` now: without any, a change has nobody to wake."""
        self._putting: dict[WriteKey, object] = {}
        """The puts under way, each with a marker of its own (nobody waits on it: an
        event there was two containers alive across every put's statement)."""
        self._sweep: asyncio.TimerHandle | asyncio.Handle | None = None
        self._alone: set[asyncio.Task[None]] = set()

    def _notify(self) -> None:
        if self._listeners:  # a new event only when one was waited on (most changes)
            self._changed.set()
            self._changed = asyncio.Event()

    async def _next_change(self) -> None:
        """Waits for the next `_notify`."""
        self._listeners += 1
        try:
            await self._changed.wait()
        finally:
            self._listeners -= 1

    async def store(
        self,
        key: WriteKey,
        prepare: Prepare,
        store_alone: StoreAlone,
        *,
        ends_step: bool = False,
    ) -> bool:
        """Serializes the writes, then parks them for a `put` or stores them alone.

        Returns whether they parked: a `put`, or else the parking, stores them. Writes that
        end their step (`ends_step`: an error or an interrupt) also store, before this
        returns, the writes parked for the same checkpoint: no put will carry them.
        """
        registry = self._registry
        registry.enter(key)
        busy = True
        try:
            park, params = prepare()
            if park and registry.thread_is_warm(key):
                registry.park(key, params, None, store_alone)
                busy = False
                self._sweep_later()
                return True
            stranded = [self._store_alone(e) for e in registry.end_step(key)] if ends_step else []
            try:
                await store_alone(params)
            except Exception as exc:
                if not registry.may_hand_over(key, park, exc):
                    raise
                busy = False
                if not await self._ahand_over(key, params):
                    busy = True  # counted busy again (`_ahand_over`)
                    raise
            finally:
                if stranded:
                    await asyncio.wait(stranded)
            return False
        finally:
            if busy:
                registry.leave(key)
            self._notify()

    async def _ahand_over(self, key: WriteKey, params: dict[str, Any]) -> bool:
        """Parks writes that failed alone for the `put` waiting for them (the caller's busy
        count moves to the parked entry); True once that put committed them."""
        registry = self._registry
        stored = _Settled()
        entry = registry.park(key, params, stored)
        self._notify()
        try:
            if not await stored.wait(HANDOVER_WAIT):
                if registry.unpark(key, entry, timed_out=False):
                    registry.enter(key)  # the caller leaves it
                    return False
                await stored.wait()  # taken just now: its put is running
        except BaseException:  # cancelled: nobody waits for these writes any more
            if not registry.unpark(key, entry, timed_out=False):
                registry.abandon(entry)
            raise
        if entry.error is not None:
            registry.count_failed(entry)  # the caller leaves it
        return entry.error is None

    def _store_alone(self, entry: ParkedWrites) -> asyncio.Task[None]:
        """Stores alone, in a task of its own, writes whose writer has returned (counted
        busy by the caller; no longer busy once stored or failed)."""
        task = asyncio.get_running_loop().create_task(self._alone_task(entry))
        self._alone.add(task)
        task.add_done_callback(self._alone.discard)
        return task

    async def _alone_task(self, entry: ParkedWrites) -> None:
        registry = self._registry
        busy = True
        try:
            assert entry.store_alone is not None
            await entry.store_alone(entry.params)
        except Exception as exc:
            if registry.hand_back(entry, exc):
                busy = False
                self._sweep_later()
                return
            _unstored(entry, exc)
        except asyncio.CancelledError:  # the loop shuts down: call aflush_writes() first
            logger.warning(
                "Writes of task %s (thread %s) were not stored: their loop shut down first",
                entry.params.get("task_id"),
                entry.key[0],
            )
            raise
        finally:
            if busy:
                registry.leave(entry.key)
            self._notify()

    def _sweep_later(self) -> None:
        """Makes sure a sweep runs once the oldest parked writes may have timed out."""
        if self._sweep is None:
            loop = asyncio.get_running_loop()
            wait = self._registry.wait
            self._sweep = loop.call_later(wait, self._sweep_now, loop.time() + wait, 0)

    def _sweep_now(self, due: float, turns: int) -> None:
        """Stores alone the parked writes no put took within the wait."""
        self._sweep = None
        registry = self._registry
        if not registry.parked:
            return
        loop = asyncio.get_running_loop()
        if loop.time() - due > registry.wait and turns < CONGESTED_TURNS:
            self._sweep = loop.call_soon(self._sweep_now, due, turns + 1)
            return
        for entry in registry.expired(time.monotonic(), self._putting.keys()):
            self._store_alone(entry)
        if registry.parked:
            self._sweep_later()

    async def flush_thread(self, thread_id: str, checkpoint_ns: str | None = None) -> None:
        """Stores the parked writes of a thread (of one namespace, unless None) before a
        read of it: a run that returned (or a reader beside it) sees every write whose
        writer returned."""
        registry = self._registry
        if registry.parked:
            found = registry.of_thread(thread_id, checkpoint_ns)
            if found:
                await asyncio.wait([self._store_alone(entry) for entry in found])
        # Writes of the thread being stored meanwhile (by a sweep, a failed put, another
        # reader): a read goes on once they are in, as it did when their writer waited.
        while registry.busy and registry.busy_in_thread(thread_id, checkpoint_ns):
            await self._next_change()

    async def flush(self) -> None:
        """Stores every parked write now and waits for those being stored alone: before
        the saver's connections close, or its caller exits."""
        for entry in self._registry.expired(math.inf, frozenset(), timed_out=False):
            self._store_alone(entry)
        while self._alone:
            await asyncio.wait(set(self._alone))

    def carried_by_put(
        self,
        keys: Sequence[WriteKey],
        *,
        fence_token: int | None,
        events_pending: Callable[[], bool] | None = None,
    ) -> _AsyncCarriedByPut:
        """The writes a `put` for `keys` (under `fence_token`) carries, settled when the
        put's `async with` block ends.

        `keys[0]` is the checkpoint the put stores: writes that park for it while it is being
        stored are not swept until this one has finished.
        Entering waits while `events_pending()` (at most `EVENTS_WAIT`: a task of the step
        has outbox events its `put_writes` has not taken, I7), then until no call for `keys`
        is busy (I4), and takes what is parked there; on leaving, if the put failed (or was
        cancelled), those writes are stored alone before its error is raised (in tasks of
        their own, which a second cancellation leaves running).
        """
        return _AsyncCarriedByPut(self, keys, fence_token, events_pending)

    async def begin_put(
        self,
        keys: Sequence[WriteKey],
        fence_token: int | None,
        events_pending: Callable[[], bool] | None,
    ) -> tuple[object, list[ParkedWrites]]:
        """The start of a put's block (`carried_by_put`): its marker and the writes it
        takes."""
        if events_pending is not None:
            await self._await_events(events_pending, keys[0])
        taken = await self._take(keys, fence_token)
        done = self._putting[keys[0]] = object()
        return done, taken

    async def settle_put(
        self,
        key: WriteKey,
        done: object,
        taken: list[ParkedWrites],
        error: BaseException | None,
    ) -> None:
        """The end of a put's block: its writes are committed, or, after `error`, parked
        again or stored alone (awaited here, before the put's error goes on)."""
        try:
            if error is not None:
                orphans = self._settle(taken, error)
                if orphans:
                    await asyncio.wait(orphans)
        finally:
            if self._putting.get(key) is done:
                del self._putting[key]
                self._registry.linger_again(key)
        if error is None:
            self._settle(taken)

    async def _await_events(self, events_pending: Callable[[], bool], key: WriteKey) -> None:
        """Waits until `events_pending()` is false: the writers took their events (they are
        busy or parked from then on, which `_take` waits for). Rare: only a `put_writes`
        that starts after its step's put."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + EVENTS_WAIT
        while events_pending():
            left = deadline - loop.time()
            if left <= 0:
                _events_not_taken(key)
                return
            # Listening from now on: before Python 3.12, wait_for starts its own task
            # on a later turn of the loop, and a change made before then would be missed.
            self._listeners += 1
            try:
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self._changed.wait(), left)
            finally:
                self._listeners -= 1

    async def _take(
        self, keys: Sequence[WriteKey], fence_token: int | None = None
    ) -> list[ParkedWrites]:
        registry = self._registry
        if not registry.none_busy(keys):
            registry.put_waits(keys, +1)
            try:
                while not registry.none_busy(keys):
                    await self._next_change()
            finally:
                registry.put_waits(keys, -1)
        return registry.take(keys, fence_token)

    def _settle(
        self, taken: Sequence[ParkedWrites], error: BaseException | None = None
    ) -> list[asyncio.Task[None]]:
        return [self._store_alone(entry) for entry in self._registry.settle(taken, error)]


class _Released:
    """A one-shot signal on a bare lock. Several threads may wait on it (the writers of
    parallel tasks waiting for their checkpoint's put): each takes the lock and gives it
    back in turn, so once set it stays set for every waiter.

    `threading.Event` is a Python-level Condition; parking waits on every step, and the
    Event's bookkeeping showed up as several percent of the saver's CPU.
    """

    __slots__ = ("_lock",)

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._lock.acquire()

    def set(self) -> None:
        self._lock.release()

    def wait(self, timeout: float | None = None) -> bool:
        if self._lock.acquire(timeout=-1 if timeout is None else timeout):
            self._lock.release()  # stays set for a later wait
            return True
        return False


class _AsyncCarriedByPut:
    """`AsyncWriteParking.carried_by_put`'s block: an object rather than an async
    generator, whose block was three more containers alive across every put's statement
    (under many runs on one loop, each brings the collector's next pass nearer)."""

    __slots__ = ("_done", "_events_pending", "_fence_token", "_keys", "_parking", "_taken")

    def __init__(
        self,
        parking: AsyncWriteParking,
        keys: Sequence[WriteKey],
        fence_token: int | None,
        events_pending: Callable[[], bool] | None,
    ) -> None:
        self._parking, self._keys = parking, keys
        self._fence_token, self._events_pending = fence_token, events_pending
        self._done: object = None
        self._taken: list[ParkedWrites] = []

    async def __aenter__(self) -> list[ParkedWrites]:
        self._done, self._taken = await self._parking.begin_put(
            self._keys, self._fence_token, self._events_pending
        )
        return self._taken

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: object
    ) -> None:
        await self._parking.settle_put(self._keys[0], self._done, self._taken, error)


class _CarriedByPut:
    """`WriteParking.carried_by_put`'s block: an object rather than a generator, as every
    sync put enters one."""

    __slots__ = ("_done", "_key", "_parking", "_taken")

    def __init__(
        self, parking: WriteParking, key: WriteKey, done: _Released, taken: list[ParkedWrites]
    ) -> None:
        self._parking, self._key, self._done, self._taken = parking, key, done, taken

    def __enter__(self) -> list[ParkedWrites]:
        return self._taken

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: object
    ) -> None:
        self._parking.settle_put(self._key, self._done, self._taken, error)


_SYNC_PARKINGS: weakref.WeakSet[WriteParking] = weakref.WeakSet()


@atexit.register
def _flush_at_exit() -> None:
    """A process that exits normally stores what its sync savers still have parked (the
    sweeper is a daemon thread, gone at exit); `from_conn_string` has flushed already."""
    for parking in list(_SYNC_PARKINGS):
        try:
            parking.flush()
        except Exception as exc:  # a pool closed by its owner: nothing left to store with
            logger.warning("Parked writes could not be stored at exit: %s", exc)


class WriteParking:
    """Parking for `DurablePostgresSaver`; calls come from LangGraph's worker threads.

    As in `AsyncWriteParking`, a writer whose writes park returns at once: its waiting
    thread cost each step a wake-up and a hand-off of the GIL (6% of a step's wall time on
    a 10-node graph). A sweeper thread, started on the first park and ended after
    `SWEEPER_IDLE` seconds with nothing parked, stores alone the writes no put took within
    the wait; it looks once per wait, not once per step. A put that fails stores the writes
    it took alone before it raises (as their writers did when they waited), so a run that
    failed has stored them, or failed to, by the time it raises.
    """

    def __init__(self, linger: float, *, hand_over: bool = True) -> None:
        self._registry = _Registry(linger, hand_over)
        # Entered through the lock itself: `with` on the condition runs two Python-level
        # methods of threading.py per block, and every put and parked write takes it twice.
        self._lock = threading.RLock()  # what Condition() makes on its own
        self._changed = threading.Condition(self._lock)
        self._putting: dict[WriteKey, _Released] = {}
        _SYNC_PARKINGS.add(self)
        self._sweeper: threading.Thread | None = None
        self._sweeping = False
        """The sweeper is storing writes alone (`flush` waits for it)."""

    def store(
        self,
        key: WriteKey,
        prepare: Prepare,
        store_alone: Callable[[dict[str, Any]], None],
        *,
        ends_step: bool = False,
    ) -> bool:
        """Serializes the writes, then parks them for a `put` or stores them alone.

        Returns whether they parked: a `put`, or else the sweeper, stores them. Writes that
        end their step (`ends_step`: an error or an interrupt) also store, before this
        returns, the writes parked for the same checkpoint: no put will carry them.
        """
        registry = self._registry
        with self._lock:
            registry.enter(key)
        busy = True
        try:
            park, params = prepare()
            stranded: list[ParkedWrites] = []
            with self._lock:
                if park and registry.thread_is_warm(key):
                    self._start_sweeping()
                    registry.park(key, params, None, store_alone)
                    busy = False
                    self._changed.notify_all()
                    return True
                if ends_step:
                    stranded = registry.end_step(key)
            try:
                store_alone(params)
            except Exception as exc:
                with self._lock:
                    waiting = registry.may_hand_over(key, park, exc)
                if not waiting:
                    raise
                busy = False
                if not self._hand_over(key, params):
                    busy = True  # counted busy again (`_hand_over`)
                    raise
            finally:
                self._store_each_alone(stranded)
            return False
        finally:
            if busy:
                with self._lock:
                    registry.leave(key)
                    self._changed.notify_all()

    def _store_alone(self, entry: ParkedWrites) -> None:
        """Stores alone writes whose writer has returned (counted busy by the caller; no
        longer busy once stored or failed). Interrupted (Ctrl-C in the thread that
        stores them), they are parked again for the sweeper: stored twice is harmless,
        never stored is not."""
        registry = self._registry
        busy = True
        try:
            assert entry.store_alone is not None
            entry.store_alone(entry.params)
        except Exception as exc:
            with self._lock:
                self._start_sweeping()
                if registry.hand_back(entry, exc):
                    busy = False
                    self._changed.notify_all()
                    return
            _unstored(entry, exc)
        except BaseException:
            self._park_again([entry])
            busy = False
            raise
        finally:
            if busy:
                with self._lock:
                    registry.leave(entry.key)
                    self._changed.notify_all()

    def _store_each_alone(self, entries: Sequence[ParkedWrites]) -> None:
        """`_store_alone` for each of `entries` (taken, counted busy), in turn. Interrupted
        (Ctrl-C), the ones not tried yet are parked again for the sweeper: left taken and
        busy, they would hold up every later read and put of their thread for ever."""
        for at, entry in enumerate(entries):
            try:
                self._store_alone(entry)
            except BaseException:
                self._park_again(entries[at + 1 :])
                raise

    def _park_again(self, entries: Sequence[ParkedWrites]) -> None:
        """Taken writes that were not stored (counted busy): parked again, no longer busy,
        for the sweeper to store."""
        if not entries:
            return
        registry = self._registry
        with self._lock:
            for entry in entries:
                registry.park(entry.key, entry.params, None, entry.store_alone)
            self._changed.notify_all()
            try:
                self._start_sweeping()
            except RuntimeError:  # no thread can start: the next read or flush stores them
                logger.warning("writes parked again without a sweeper: no thread could start")

    def _start_sweeping(self) -> None:
        """Starts the sweeper if none runs (the caller holds the lock); raises, parking
        nothing, if no thread can start (an interpreter shutting down)."""
        if self._sweeper is None:
            sweeper = threading.Thread(
                target=self._sweep, name="langgraph-durable-parking", daemon=True
            )
            sweeper.start()
            self._sweeper = sweeper

    def _sweep(self) -> None:
        """The sweeper: every wait, stores alone the parked writes that timed out.

        It looks once per wait while writes are parked, and is never woken by a park:
        waking it on each one cost a thread switch per step. While nothing is parked it
        looks less and less often (up to every `_IDLE_PAUSE_LINGERS` lingers), so a saver
        between runs does not wake every two milliseconds. Writes no put takes are stored
        one to two waits after they parked, or up to that pause after, when they parked
        after a quiet spell. It ends once nothing was parked for `SWEEPER_IDLE` seconds.
        """
        registry = self._registry
        idle = pause = 0.0
        while True:
            with self._lock:
                due = registry.expired(time.monotonic(), self._putting.keys())
                if not due:
                    if idle >= SWEEPER_IDLE and not registry.parked:
                        self._sweeper = None
                        return
                    if registry.parked:
                        idle, pause = 0.0, registry.wait
                    else:  # look less often while nothing waits: idle savers stay quiet
                        pause = min(
                            max(2 * pause, registry.wait), _IDLE_PAUSE_LINGERS * registry.linger
                        )
                        idle += pause
                else:
                    self._sweeping = True
            if not due:
                time.sleep(pause)  # pacing, not waiting for anything
                continue
            idle = 0.0
            try:
                for entry in due:
                    self._store_alone(entry)
            finally:
                with self._lock:
                    self._sweeping = False
                    self._changed.notify_all()

    def flush_thread(self, thread_id: str, checkpoint_ns: str | None = None) -> None:
        """Stores the parked writes of a thread (of one namespace, unless None) before a
        read of it: a run that returned (or a reader beside it) sees every write whose
        writer returned."""
        registry = self._registry
        if not registry.parked and not registry.busy:
            return
        for _ in range(2):
            with self._lock:
                found = registry.of_thread(thread_id, checkpoint_ns)
            self._store_each_alone(found)
            # Writes of the thread being stored meanwhile (by the sweeper, a failed put,
            # another reader): a read goes on once they are in, as when their writer
            # waited. Another reader interrupted while storing them parks them again: a
            # second turn stores those.
            with self._lock:
                self._changed.wait_for(
                    lambda: not registry.busy_in_thread(thread_id, checkpoint_ns)
                )
                if not registry.parked_in_thread(thread_id, checkpoint_ns):
                    return

    def flush(self) -> None:
        """Stores every parked write now: before the saver's connections close, or its
        caller exits."""
        registry = self._registry
        with self._lock:
            due = registry.expired(math.inf, frozenset(), timed_out=False)
        self._store_each_alone(due)
        with self._lock:  # and what the sweeper is storing now
            self._changed.wait_for(lambda: not self._sweeping)

    def _hand_over(self, key: WriteKey, params: dict[str, Any]) -> bool:
        """Parks writes that failed alone for the `put` waiting for them (the caller's busy
        count moves to the parked entry); True once that put committed them."""
        registry = self._registry
        stored = _Released()
        with self._lock:
            entry = registry.park(key, params, stored)
            self._changed.notify_all()
        if not stored.wait(HANDOVER_WAIT):
            with self._lock:
                if registry.unpark(key, entry, timed_out=False):
                    registry.enter(key)  # the caller leaves it
                    return False
            stored.wait()  # taken just now: its put is running
        if entry.error is not None:
            with self._lock:
                registry.count_failed(entry)  # the caller leaves it
        return entry.error is None

    def carried_by_put(
        self,
        keys: Sequence[WriteKey],
        *,
        fence_token: int | None,
        events_pending: Callable[[], bool] | None = None,
    ) -> _CarriedByPut:
        """The writes a `put` for `keys` (under `fence_token`) carries, settled when the
        put's block ends (`AsyncWriteParking.carried_by_put` says what it waits for). Takes
        them now; use it at once in a `with` block."""
        done = _Released()
        taken = self._take(keys, fence_token, putting=done, events_pending=events_pending)
        return _CarriedByPut(self, keys[0], done, taken)

    def settle_put(
        self,
        key: WriteKey,
        done: _Released,
        taken: list[ParkedWrites],
        error: BaseException | None,
    ) -> None:
        """The end of a put's block (`carried_by_put`): its writes are committed, or,
        after `error`, parked again or stored alone."""
        orphans: list[ParkedWrites] = []
        try:
            with self._lock:
                if self._putting.get(key) is done:
                    del self._putting[key]
                    self._registry.linger_again(key)
                orphans = self._registry.settle(taken, error)
        finally:
            done.set()  # writers waiting for this checkpoint never wait for ever
            self._store_each_alone(orphans)  # the put failed: before its error is raised

    def _take(
        self,
        keys: Sequence[WriteKey],
        fence_token: int | None = None,
        *,
        putting: _Released | None = None,
        events_pending: Callable[[], bool] | None = None,
    ) -> list[ParkedWrites]:
        """Waits while `events_pending()` (at most `EVENTS_WAIT`), then until no call for
        `keys` is busy, and takes what is parked there; with `putting`, records the put as
        storing `keys[0]` in the same turn of the lock."""
        registry = self._registry
        with self._lock:
            gave_up = events_pending is not None and not self._changed.wait_for(
                lambda: not events_pending(), EVENTS_WAIT
            )
            if not registry.none_busy(keys):
                registry.put_waits(keys, +1)
                try:
                    self._changed.wait_for(lambda: registry.none_busy(keys))
                finally:
                    registry.put_waits(keys, -1)
            taken = registry.take(keys, fence_token)
            if putting is not None:
                self._putting[keys[0]] = putting
        if gave_up:  # logged outside the lock
            _events_not_taken(keys[0])
        return taken

    def _settle(self, taken: Sequence[ParkedWrites], error: BaseException | None = None) -> None:
        with self._lock:
            orphans = self._registry.settle(taken, error)
        self._store_each_alone(orphans)
