"""Puts that wait for a connection go together: one statement and one commit for several.

When every connection is busy, each `put` used to wait for one of its own and then pay a
whole statement: the driver's execute, a round trip, a commit. Those costs are per
statement, not per row (an async execute of a checkpoint row costs the client about
150 us of CPU; sixteen rows unnested from arrays in one statement, about 25 us each), so
under load they are most of a put. Here puts that find every statement slot taken (as
many as the pool has connections) wait in a queue, and the next free slot stores all of
them at once (`_sql.put_checkpoints`). Each put still returns only once its own rows are
committed, and all of one put's rows are in one transaction, as before (I4).

What goes together (`fits`): puts without a fencing token, run progress or outbox events,
and none larger than `MAX_PUT_BYTES`. Those others wait in the same queue, in their turn,
and are stored alone; any put while a slot is free is stored alone at once, as before,
except that puts that fit go one statement at a time (group commit: while one is under way
the next ones wait and go together, `AsyncPutCombiner`).
Two puts of one checkpoint never share a statement (`ON CONFLICT DO UPDATE` may not touch
a row twice).

When a combined statement fails, the database was out of reach (`outage`: every put of
the batch fails with that error, as each would have alone), or something about one put or
a lock held elsewhere made it fail (the statement gives up on a lock after
`LOCK_TIMEOUT_MS`): then each put goes back to its own caller, who stores it alone, at once
and side by side, so each gets its own outcome under the saver's own timeouts. Storing a
put twice changes nothing (its statements are idempotent), so a put whose batch may or
may not have committed is simply stored again.

A hand-written pair, like `_parking.py`: waiting is written differently for asyncio and
for threads. The batching itself (`fits`, `take_batch`, `combined`) is shared.
"""

from __future__ import annotations

import asyncio
import collections
import contextvars
import math
import threading
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Protocol

from typing_extensions import LiteralString

from langgraph_durable._db.arrays import BytesArray, IntArray, TextArray
from langgraph_durable._sql import parameter_names, put_checkpoints
from langgraph_durable.errors import DatabaseUnreachableError, PoolClosedError

__all__ = [
    "LOCK_TIMEOUT_MS",
    "MAX_BATCH",
    "MAX_PUT_BYTES",
    "AsyncPutCombiner",
    "PutCombiner",
    "combined",
    "fits",
    "take_batch",
]

MAX_BATCH = 64
"""Puts in one statement at most: bounds a statement's size and one commit's wait."""

MAX_PUT_BYTES = 64 * 1024
"""A put with more bytes of checkpoint JSON and blobs than this goes alone: a large value
would hold up every small put of its batch."""

LOCK_TIMEOUT_MS = 100
"""How long a combined statement waits for a row lock held elsewhere before its puts are
stored one by one (the saver's own `lock_timeout` applies to those; a shorter one of the
saver's applies to the combined statement too)."""

LANE_WAIT_S = LOCK_TIMEOUT_MS / 1000
"""How long the puts that fit wait for the lane's statement (`AsyncPutCombiner`,
`PutCombiner`) before the next ones go beside it: a put alone waiting on a row lock, or a
slow statement, holds the others up no longer than a combined statement waits for a
lock."""

Params = dict[str, Any]


class Slots(Protocol):
    """What the combiner asks of a connection source (`_db` `ConnectionSource`)."""

    @property
    def capacity(self) -> int:
        """How many statements may be under way at once (a pool may be resized)."""

    @property
    def wait_timeout(self) -> float | None:
        """How long a put may wait in the queue: the pool's timeout, as for a connection."""

    def timed_out(self) -> Exception:
        """The error for a put that waited `wait_timeout` in vain."""


def fits(params: Mapping[str, Any]) -> bool:
    """Whether a put's parameters may share a statement: no fencing token (its fence is
    checked per statement), no run progress, no outbox events, and not large."""
    if params["fence_token"] is not None or params["run_id"] is not None or params["e_ids"]:
        return False
    size = len(params["checkpoint"]) + len(params["metadata"])  # characters: near enough
    size += sum(len(blob) for blob in params["blobs"] if blob is not None)
    size += sum(len(blob) for blob in params["w_blobs"] if blob is not None)
    return size <= MAX_PUT_BYTES


def outage(exc: BaseException) -> bool:
    """Whether a combined statement failed because the database was out of reach (or the
    pool closed): storing its puts one by one would only wait out the same failure again,
    once per put."""
    return isinstance(exc, (DatabaseUnreachableError, PoolClosedError))


def _own_copy(exc: BaseException) -> BaseException:
    """The error for one waiter of a batch that failed in an outage: its own instance (one
    raised in several threads at once would get their tracebacks mixed), caused by the
    original. Outage errors are `DurableError`s, made from their message alone; one that
    cannot be is shared as it is."""
    try:
        copy = type(exc)(str(exc))
    except Exception:
        return exc
    copy.__cause__ = exc
    return copy


def batch_outcome(exc: Exception, size: int) -> bool | BaseException:
    """What each caller of a batch of `size` puts that failed with `exc` is told: the
    error itself (a batch of one, or an outage: storing it alone would wait out the same
    failure again), else False: store it alone."""
    if size == 1 or outage(exc):
        return exc
    return False


def _told(outcome: bool | BaseException, size: int) -> bool | BaseException:
    """`outcome` for one caller: an error shared by several callers as its own copy."""
    if isinstance(outcome, BaseException) and size > 1:
        return _own_copy(outcome)
    return outcome


_CHECKPOINT_COLUMNS = (
    ("thread_id", "thread_ids"),
    ("checkpoint_ns", "checkpoint_nss"),
    ("checkpoint_id", "checkpoint_ids"),
    ("parent_checkpoint_id", "parent_checkpoint_ids"),
    ("checkpoint", "checkpoints"),
    ("metadata", "metadatas"),
)
_BLOB_ARRAYS = ("channels", "versions", "types", "blobs")
_WRITE_ARRAYS = (
    "w_checkpoint_ids",
    "w_task_ids",
    "w_task_paths",
    "w_idxs",
    "w_channels",
    "w_types",
    "w_blobs",
)
_ARRAY_TYPES: dict[str, type[list[Any]]] = {
    "blobs": BytesArray,
    "w_idxs": IntArray,
    "w_blobs": BytesArray,
}


def combined(
    batch: Sequence[Mapping[str, Any]], lock_timeout_ms: int = LOCK_TIMEOUT_MS
) -> tuple[LiteralString, Params]:
    """The statement storing every put of `batch` (each `fits`), and its parameters."""
    params: Params = {
        # One saver's puts ask alike; should they not, the durable setting wins.
        "synchronous_commit": "on"
        if any(put["synchronous_commit"] == "on" for put in batch)
        else "off",
        "lock_timeout": f"{lock_timeout_ms}ms",
    }
    for column, name in _CHECKPOINT_COLUMNS:
        params[name] = TextArray(put[column] for put in batch)
    rows: dict[str, list[Any]] = {
        name: []
        for name in ("b_thread_ids", "b_checkpoint_nss", "w_thread_ids", "w_checkpoint_nss")
    }
    for name in (*_BLOB_ARRAYS, *_WRITE_ARRAYS):
        rows[name] = []
    for put in batch:
        for prefix, arrays, count in (
            ("b", _BLOB_ARRAYS, len(put["blobs"])),
            ("w", _WRITE_ARRAYS, len(put["w_task_ids"])),
        ):
            if count:
                for name in arrays:
                    rows[name] += put[name]
                rows[f"{prefix}_thread_ids"] += [put["thread_id"]] * count
                rows[f"{prefix}_checkpoint_nss"] += [put["checkpoint_ns"]] * count
    for name, values in rows.items():
        params[name] = _ARRAY_TYPES.get(name, TextArray)(values)
    query = put_checkpoints(blobs=bool(rows["blobs"]), parked_writes=bool(rows["w_blobs"]))
    return query, {name: params[name] for name in parameter_names(query)}


Waiting = collections.deque[tuple[Params, Any]]
"""Puts waiting to go together, oldest first: each with what its caller waits on."""


def take_batch(waiting: Waiting) -> list[tuple[Params, Any]]:
    """The next puts to store, oldest first: the oldest alone if it cannot share a
    statement (`fits`), else up to `MAX_BATCH` that can, no two of one checkpoint, and
    none of a thread behind one of its puts left for later (the others stay, in their
    places, for the next batches)."""
    if waiting and not fits(waiting[0][0]):
        return [waiting.popleft()]
    batch: list[tuple[Params, Any]] = []
    keys: set[tuple[str, str, str]] = set()
    held: set[tuple[str, str]] = set()  # threads with a put left behind: theirs wait too
    skipped: list[tuple[Params, Any]] = []
    while waiting and len(batch) < MAX_BATCH:
        entry = waiting.popleft()
        params = entry[0]
        thread = (params["thread_id"], params["checkpoint_ns"])
        key = (*thread, params["checkpoint_id"])
        if key in keys or thread in held or not fits(params):
            skipped.append(entry)
            held.add(thread)
            continue
        keys.add(key)
        batch.append(entry)
    waiting.extendleft(reversed(skipped))
    return batch


def _leave(waiting: Waiting, entry: tuple[Params, Any]) -> bool:
    """Take a put out of the queue; False if it was no longer there (taken into a batch).
    Matched by its waiter, which is the caller's own."""
    for i, (_, waiter) in enumerate(waiting):
        if waiter is entry[1]:
            del waiting[i]
            return True
    return False


class AsyncPutCombiner:
    """Stores puts alone while a statement slot is free, together while none is; puts
    that can share a statement (`fits`) one statement at a time (group commit).

    Args:
        slots: The connection source: how many statements may be under way at once
            (asked on every put), and how long a put may wait for one.
        store_one: Stores one put (the single-put statement, with its own retries).
        store_many: Stores several `fits` puts in one statement.

    Every put that finds no slot free waits in the queue, in its turn, also one that
    cannot share a statement (it is then stored alone when its turn comes): puts going
    ahead of the queue could keep every slot taken and starve it. Waiting puts are stored
    by flusher tasks, one per free slot. A put's caller waits on a future: True when
    stored, False when it must store the put alone (its batch failed), which it does at
    once, beside the others.

    Puts that fit have one lane: while a statement carrying such puts is under way (a put
    stored alone, or a flusher's batch), the next ones wait for it, however many slots are
    free, and then go together in the lane's next statement. Many runs on one event loop
    keep it busy; each statement costs the loop CPU (the driver's execute, the wake-ups),
    so fewer, fuller statements leave it more for the runs: at 64 runs on a pool of 4, 5
    puts per statement became 15 and a step's CPU fell by a tenth (`docs/design.md`, "One
    lane for puts that go together"). Waiting for the lane's statement is bounded by
    `LANE_WAIT_S` (its statement may be a put alone under the saver's own `lock_timeout`):
    then the waiting puts get a lane of their own beside it. Puts that cannot share a
    statement (fenced, with events, large) use free slots at once while none waits; queued
    behind a put waiting for the lane, they wait with it, in their turn.
    """

    def __init__(
        self,
        slots: Slots,
        store_one: Callable[[Params], Awaitable[None]],
        store_many: Callable[[Sequence[Params]], Awaitable[None]],
    ) -> None:
        self._slots = slots
        self._store_one, self._store_many = store_one, store_many
        self._running = 0
        self._lane: object | None = None
        """Who holds the lane: the put stored alone (its parameters) or the flusher task
        storing the puts that fit; None while it is free."""
        self._lane_timer: asyncio.TimerHandle | None = None
        """Frees the lane `LANE_WAIT_S` after a put began to wait for the lane's current
        statement; armed only then."""
        self._waiting: Waiting = collections.deque()
        self._flushers: set[asyncio.Task[None]] = set()
        self._deadlines: dict[asyncio.Future[bool], float] = {}
        """When each waiting put's wait runs out (`loop.time()`), if the pool has a timeout."""
        self._expiry: asyncio.TimerHandle | None = None
        """The queue's one timer, for its earliest deadline, on the loop of the saver
        (one per combiner): a timer per put (armed, then cancelled) left each put a timer
        handle on the loop's heap until its deadline passed, which under 64 runs on one
        loop made the collector's full passes about a tenth more frequent."""

    @property
    def waiting(self) -> int:
        """How many puts wait to go together now."""
        return len(self._waiting)

    async def store(self, params: Params) -> None:
        """Store one put's parameters (`put_checkpoint_statement`'s); returns once they
        are committed, raises what storing them raised."""
        lane = fits(params)
        if (
            self._running < self._slots.capacity
            and not self._waiting
            and not (lane and self._lane is not None)
        ):
            await self._alone(params, lane)
            return
        loop = asyncio.get_running_loop()
        stored: asyncio.Future[bool] = loop.create_future()
        self._waiting.append((params, stored))
        if lane and self._lane is not None:
            self._wait_for_lane()
        self._start_flushers()
        limit = self._slots.wait_timeout
        if limit is not None:
            self._deadlines[stored] = deadline = loop.time() + limit
            if self._expiry is None or self._expiry.when() > deadline:
                if self._expiry is not None:  # the pool's timeout was lowered since
                    self._expiry.cancel()
                self._expiry = loop.call_at(deadline, self._expire_due)
        try:
            ok = await stored
        finally:
            self._deadlines.pop(stored, None)
        if not ok:
            await self._alone(params)

    def _expire_due(self) -> None:
        """The queue's timer is up. Puts that waited the pool's timeout leave the queue
        with the pool's timeout error (nothing of them was written), as they would have
        waiting for a connection; one already taken into a batch waits for that batch's
        outcome. While puts wait, the timer is armed again for the earliest deadline."""
        loop = asyncio.get_running_loop()
        self._expiry = None
        now = loop.time()
        due = [entry for entry in self._waiting if self._deadline(entry) <= now]
        for entry in due:
            if _leave(self._waiting, entry) and not entry[1].done():
                entry[1].set_exception(self._slots.timed_out())
        earliest = min(map(self._deadline, self._waiting), default=math.inf)
        if earliest < math.inf:
            self._expiry = loop.call_at(earliest, self._expire_due)

    def _deadline(self, entry: tuple[Params, asyncio.Future[bool]]) -> float:
        return self._deadlines.get(entry[1], math.inf)

    async def _alone(self, params: Params, lane: bool = False) -> None:
        """Stores one put at once; `lane`: it holds the lane meanwhile (`fits`; not a put
        whose batch failed, which goes beside the others)."""
        self._running += 1
        if lane:
            self._claim_lane(params)
        try:
            await self._store_one(params)
        finally:
            self._running -= 1
            if lane:
                self._release_lane(params)
            self._start_flushers()

    def _claim_lane(self, holder: object) -> None:
        self._lane = holder

    def _wait_for_lane(self) -> None:
        """A put waits for the lane's statement: for `LANE_WAIT_S` at most from now, unless
        one waits already."""
        if self._lane_timer is None:
            self._lane_timer = asyncio.get_running_loop().call_later(
                LANE_WAIT_S, self._lane_overdue, self._lane
            )

    def _release_lane(self, holder: object) -> None:
        """The holder's statement ended; a holder whose lane ran over has none to free."""
        if self._lane is holder:
            self._lane = None
            self._stop_lane_timer()

    def _stop_lane_timer(self) -> None:
        if self._lane_timer is not None:
            self._lane_timer.cancel()
            self._lane_timer = None

    def _lane_overdue(self, holder: object) -> None:
        """Puts waited `LANE_WAIT_S` for the lane: its statement goes on, and the waiting
        puts that fit get a lane of their own beside it."""
        if self._lane is holder:
            self._lane = None
            self._lane_timer = None
            self._start_flushers()

    def _start_flushers(self) -> None:
        # Puts whose callers were cancelled while they waited are not stored: the callers
        # have moved on, and the writes those puts carried are stored alone (_parking.py).
        while self._waiting and self._waiting[0][1].cancelled():
            self._waiting.popleft()
        while self._waiting and self._running < self._slots.capacity:
            lane = fits(self._waiting[0][0])
            if lane and self._lane is not None:
                break  # the puts that fit wait for the lane's statement (`_wait_for_lane`)
            self._running += 1
            # In a context of its own: a batch is no one put's work (telemetry spans).
            task = contextvars.Context().run(
                asyncio.get_running_loop().create_task, self._flush(lane)
            )
            self._flushers.add(task)  # a strong reference until it ends
            if lane:
                self._claim_lane(task)  # now: the task starts on a later turn
                task.add_done_callback(self._lane_done)
            else:
                task.add_done_callback(self._flusher_done)

    def _lane_done(self, task: asyncio.Task[None]) -> None:
        self._release_lane(task)
        self._flusher_done(task)

    def _flusher_done(self, task: asyncio.Task[None]) -> None:
        # A callback, not a `finally`: it also runs for a task cancelled before it started.
        self._flushers.discard(task)
        self._running -= 1
        if not task.get_loop().is_closed():
            self._start_flushers()

    async def _flush(self, lane: bool) -> None:
        """Stores waiting puts batch after batch while the queue's first one is of this
        flusher's kind: puts that fit (`lane`: while it holds the lane, which it frees when
        it ends, `_lane_done`) or one that does not."""
        me = asyncio.current_task() if lane else None
        while (
            self._waiting and fits(self._waiting[0][0]) == lane and (me is None or self._lane is me)
        ):
            batch = take_batch(self._waiting)
            if lane:  # a new statement: the puts left waiting wait for it from now
                self._stop_lane_timer()
                if self._waiting:
                    self._wait_for_lane()
            batch = [entry for entry in batch if not entry[1].cancelled()]
            if batch:
                await self._store_batch(batch)

    async def _store_batch(self, batch: list[tuple[Params, asyncio.Future[bool]]]) -> None:
        # Cancelled or interrupted midway, whether it committed is unknown; storing a put
        # again changes nothing, so every caller still waiting stores its own (False).
        outcome: bool | BaseException = False
        try:
            if len(batch) == 1:
                await self._store_one(batch[0][0])
            else:
                await self._store_many([params for params, _ in batch])
            outcome = True
        except Exception as exc:
            outcome = batch_outcome(exc, len(batch))
        finally:
            for _, stored in batch:
                if stored.done():
                    continue
                told = _told(outcome, len(batch))
                if isinstance(told, BaseException):
                    stored.set_exception(told)
                else:
                    stored.set_result(told)


class _Entry:
    """A waiting put of the threads' flavour, woken when its outcome is decided or to
    store a batch. `outcome`: True (stored), False (store it alone: also what a put
    woken without one does), or the error to raise."""

    __slots__ = ("batch", "outcome", "params", "woken")

    def __init__(self, params: Params) -> None:
        self.params = params
        self.batch: list[_Entry] | None = None
        self.outcome: bool | BaseException = False
        self.woken = threading.Lock()
        self.woken.acquire()  # released once: a bare lock is the cheapest one-shot signal


class PutCombiner:
    """The threads' flavour of `AsyncPutCombiner` (same arguments), with the same lane.

    No thread of its own: when a slot (and, for puts that fit, the lane) frees up, the
    oldest waiting put's thread is woken with a batch (its own put first) and stores it,
    then wakes the others. Each thread stores at most one batch, the one holding its own
    put, so none is kept busy with other threads' puts while its own run waits.

    The lane is held by the put stored alone or the thread storing a batch of puts that
    fit. Without a timer, every waiting thread wakes each `LANE_WAIT_S`; the first to
    find the lane claimed longer ago than that frees it for the waiting puts. A pool
    timeout no longer than `LANE_WAIT_S` ends the wait first, as in the async flavour.
    """

    def __init__(
        self,
        slots: Slots,
        store_one: Callable[[Params], None],
        store_many: Callable[[Sequence[Params]], None],
    ) -> None:
        self._slots = slots
        self._store_one, self._store_many = store_one, store_many
        self._running = 0
        self._lane: object | None = None
        """Who holds the lane: a token of the put stored alone, or the `_Entry` of the
        thread storing a batch; None while it is free."""
        self._lane_since = 0.0
        """When the lane was last claimed (`time.monotonic()`): its holder's statement
        starts then, or once the holder's thread has woken up."""
        self._lock = threading.Lock()
        self._waiting: Waiting = collections.deque()

    @property
    def waiting(self) -> int:
        """How many puts wait to go together now."""
        return len(self._waiting)

    def store(self, params: Params) -> None:
        """Store one put's parameters; returns once they are committed."""
        entry: _Entry | None = None
        holder: object | None = None
        lane = fits(params)
        try:
            with self._lock:
                if (
                    self._running < self._slots.capacity
                    and not self._waiting
                    and not (lane and self._lane is not None)
                ):
                    self._running += 1
                    holder = object() if lane else _ALONE
                    if lane:
                        self._claim_lane(holder)
                else:
                    entry = _Entry(params)
                    self._waiting.append((params, entry))
                    self._promote()
            if entry is None:
                self._store_one(params)
                return
            self._wait(entry)
        except BaseException:  # interrupted (Ctrl-C) while it waited: leave nothing behind
            if entry is not None:
                self._abandon(entry)
            raise
        finally:
            if holder is not None:
                self._release(holder)
        if entry.batch is not None:
            try:
                self._store_batch(entry.batch)
            finally:
                self._release(entry)
        outcome = entry.outcome
        if isinstance(outcome, BaseException):
            raise outcome
        if not outcome:
            self._store_alone(params)

    def _wait(self, entry: _Entry) -> None:
        """Waits until `entry` is woken: for the pool's timeout at most (then it leaves the
        queue with the pool's error, unless already taken into a batch), in turns of
        `LANE_WAIT_S`, after each of which an overdue lane is freed."""
        limit = self._slots.wait_timeout
        deadline = math.inf if limit is None else time.monotonic() + limit
        while True:
            left = deadline - time.monotonic()
            if entry.woken.acquire(timeout=max(0.0, min(left, LANE_WAIT_S))):
                return
            with self._lock:
                if left <= LANE_WAIT_S:  # the pool's timeout is up
                    if _leave(self._waiting, (entry.params, entry)):
                        self._promote()  # it may have held up those behind it
                        raise self._slots.timed_out()  # nothing of it was written
                    break  # already taken into a batch: its outcome comes
                if self._lane is not None and time.monotonic() - self._lane_since >= LANE_WAIT_S:
                    self._lane = None  # overdue: its statement goes on beside the next
                self._promote()
        entry.woken.acquire()

    def _claim_lane(self, holder: object) -> None:
        self._lane = holder
        self._lane_since = time.monotonic()

    def _store_alone(self, params: Params) -> None:
        """A put whose batch failed: stored beside the others, never in the lane."""
        with self._lock:
            self._running += 1
        try:
            self._store_one(params)
        finally:
            self._release(_ALONE)

    def _release(self, holder: object) -> None:
        """A statement ended: its slot, and the lane if `holder` still holds it."""
        with self._lock:
            self._give_back(holder)

    def _give_back(self, holder: object) -> None:
        """`_release`, the lock held."""
        self._running -= 1
        if self._lane is holder:
            self._lane = None
        self._promote()

    def _promote(self) -> None:
        """Hands waiting puts to their first put's thread while a slot is free and, for
        puts that fit, the lane (locked)."""
        while self._waiting and self._running < self._slots.capacity:
            lane = fits(self._waiting[0][0])
            if lane and self._lane is not None:
                break  # they wait for the lane's statement (`_wait`)
            taken = take_batch(self._waiting)
            self._running += 1
            leader: _Entry = taken[0][1]
            leader.batch = [entry for _, entry in taken]
            if lane:
                self._claim_lane(leader)
            leader.woken.release()

    def _abandon(self, entry: _Entry) -> None:
        """Undo a waiting put whose thread was interrupted: still queued, it leaves the
        queue; handed a batch it will never store, the others go back to the front and
        its slot (and the lane) is given back."""
        with self._lock:
            if _leave(self._waiting, (entry.params, entry)):
                self._promote()  # it may have held up those behind it
                return
            if entry.batch is not None:
                others = [(other.params, other) for other in entry.batch[1:]]
                self._waiting.extendleft(reversed(others))
                self._give_back(entry)

    def _store_batch(self, batch: list[_Entry]) -> None:
        """Stores `batch` (its first put is this thread's), then wakes the others; if this
        thread is interrupted midway, each of the others stores its own (False)."""
        outcome: bool | BaseException = False
        try:
            if len(batch) == 1:
                self._store_one(batch[0].params)
            else:
                self._store_many([entry.params for entry in batch])
            outcome = True
        except Exception as exc:
            outcome = batch_outcome(exc, len(batch))
        finally:
            for entry in batch:
                entry.outcome = _told(outcome, len(batch))
            for entry in batch[1:]:
                entry.woken.release()


_ALONE = object()
"""The holder of a statement that holds no lane (a put that cannot share one, or one whose
batch failed): never the lane's holder, so releasing it frees only its slot."""
