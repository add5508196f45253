"""Puts that wait for a connection go together: one statement and one commit for several.

When every connection is busy, each `put` used to wait for one of its own and then pay a
whole statement: the driver's execute, a round trip, a commit. Those costs are per
statement, not per row (an async execute of a checkpoint row costs the client about
150 us of CPU; sixteen rows unnested from arrays in one statement, about 25 us each), so
under load they are most of a put. Here puts that find every connection taken wait in a
queue, and whoever gets a connection next stores all of them at once
(`_sql.put_checkpoints`). Each put still returns only once its own rows are committed,
and all of one put's rows are in one transaction, as before (I4).

What goes together: puts without a fencing token, run progress or outbox events (`fits`).
Those others, and any put while a connection is free, are stored alone, as before. When a
combined statement fails, its puts are stored one by one, so each gets its own outcome (a
put is idempotent: storing one twice changes nothing). Two puts of one checkpoint never
share a statement: `ON CONFLICT DO UPDATE` may not touch a row twice.

A hand-written pair, like `_parking.py`: waiting is written differently for asyncio and
for threads. The batching itself (`take_batch`, `combined`) is shared.
"""

from __future__ import annotations

import asyncio
import collections
import threading
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from typing_extensions import LiteralString

from langgraph_durable._db.arrays import BytesArray, IntArray, TextArray
from langgraph_durable._sql import parameter_names, put_checkpoints

__all__ = ["AsyncPutCombiner", "PutCombiner", "combined", "fits", "take_batch"]

MAX_BATCH = 64
"""Puts in one statement at most: bounds a statement's size and one commit's wait."""

Params = dict[str, Any]


def fits(params: Mapping[str, Any]) -> bool:
    """Whether a put's parameters may share a statement: no fencing token (its fence is
    checked per statement), no run progress, no outbox events."""
    return params["fence_token"] is None and params["run_id"] is None and not params["e_ids"]


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

_WRITE_ARRAY_TYPES: dict[str, type[list[Any]]] = {"w_idxs": IntArray, "w_blobs": BytesArray}


def combined(batch: Sequence[Mapping[str, Any]]) -> tuple[LiteralString, Params]:
    """The statement storing every put of `batch` (each `fits`), and its parameters."""
    params: Params = {"synchronous_commit": batch[0]["synchronous_commit"]}
    for column, array in _CHECKPOINT_COLUMNS:
        params[array] = TextArray(put[column] for put in batch)
    blobs: dict[str, list[Any]] = {name: [] for name in _BLOB_ARRAYS}
    writes: dict[str, list[Any]] = {name: [] for name in _WRITE_ARRAYS}
    b_threads: list[str] = []
    b_nss: list[str] = []
    w_threads: list[str] = []
    w_nss: list[str] = []
    for put in batch:
        count = len(put["blobs"])
        if count:
            for name in _BLOB_ARRAYS:
                blobs[name] += put[name]
            b_threads += [put["thread_id"]] * count
            b_nss += [put["checkpoint_ns"]] * count
        count = len(put["w_task_ids"])
        if count:
            for name in _WRITE_ARRAYS:
                writes[name] += put[name]
            w_threads += [put["thread_id"]] * count
            w_nss += [put["checkpoint_ns"]] * count
    if b_threads:
        params.update(
            b_thread_ids=TextArray(b_threads),
            b_checkpoint_nss=TextArray(b_nss),
            channels=TextArray(blobs["channels"]),
            versions=TextArray(blobs["versions"]),
            types=TextArray(blobs["types"]),
            blobs=BytesArray(blobs["blobs"]),
        )
    if w_threads:
        params.update(w_thread_ids=TextArray(w_threads), w_checkpoint_nss=TextArray(w_nss))
        for name in _WRITE_ARRAYS:
            params[name] = _WRITE_ARRAY_TYPES.get(name, TextArray)(writes[name])
    query = put_checkpoints(blobs=bool(b_threads), parked_writes=bool(w_threads))
    return query, {name: params[name] for name in parameter_names(query)}


Waiting = collections.deque[tuple[Params, Any]]
"""Puts waiting to go together, oldest first: each with what its caller waits on."""


def take_batch(waiting: Waiting) -> list[tuple[Params, Any]]:
    """Up to `MAX_BATCH` waiting puts, oldest first, no two of one checkpoint (a repeat
    stays, in its place, for the next batch)."""
    batch: list[tuple[Params, Any]] = []
    keys: set[tuple[str, str, str]] = set()
    skipped: list[tuple[Params, Any]] = []
    while waiting and len(batch) < MAX_BATCH:
        entry = waiting.popleft()
        params = entry[0]
        key = (params["thread_id"], params["checkpoint_ns"], params["checkpoint_id"])
        if key in keys:
            skipped.append(entry)
            continue
        keys.add(key)
        batch.append(entry)
    waiting.extendleft(reversed(skipped))
    return batch


class AsyncPutCombiner:
    """Stores puts alone while a connection is free, together while none is.

    Args:
        limit: How many statements may be under way at once (the pool's size; 1 for one
            connection).
        store_one: Stores one put (the single-put statement, its own retries).
        store_many: Stores several `fits` puts in one statement.
    """

    def __init__(
        self,
        limit: int,
        store_one: Callable[[Params], Awaitable[None]],
        store_many: Callable[[Sequence[Params]], Awaitable[None]],
    ) -> None:
        self._limit = max(1, limit)
        self._store_one, self._store_many = store_one, store_many
        self._running = 0
        self._waiting: Waiting = collections.deque()
        self._flushers: set[asyncio.Task[None]] = set()

    @property
    def waiting(self) -> int:
        """How many puts wait to go together now."""
        return len(self._waiting)

    async def store(self, params: Params) -> None:
        """Store one put's parameters (`put_checkpoint_statement`'s); returns once they
        are committed, raises what storing them raised."""
        if not fits(params) or (self._running < self._limit and not self._waiting):
            self._running += 1
            try:
                await self._store_one(params)
            finally:
                self._running -= 1
                self._start_flushers()
            return
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.append((params, done))
        self._start_flushers()
        await done

    def _start_flushers(self) -> None:
        while self._waiting and self._running < self._limit:
            self._running += 1
            task = asyncio.get_running_loop().create_task(self._flush())
            self._flushers.add(task)  # a strong reference until it ends
            task.add_done_callback(self._flushers.discard)

    async def _flush(self) -> None:
        try:
            while batch := take_batch(self._waiting):
                # A put cancelled while it waited is not stored: its caller has moved on,
                # and the writes it carried are stored alone (`_parking.py`).
                batch = [entry for entry in batch if not entry[1].cancelled()]
                if batch:
                    await self._store_batch(batch)
        finally:
            self._running -= 1

    async def _store_batch(self, batch: list[tuple[Params, Any]]) -> None:
        try:
            if len(batch) > 1:
                try:
                    await self._store_many([params for params, _ in batch])
                except Exception:
                    pass  # one by one below: each put gets its own outcome
                else:
                    for _, done in batch:
                        if not done.done():
                            done.set_result(None)
                    return
            for params, done in batch:
                try:
                    await self._store_one(params)
                except Exception as exc:
                    if not done.done():
                        done.set_exception(exc)
                else:
                    if not done.done():
                        done.set_result(None)
        except BaseException as exc:  # cancelled (the loop is closing): nobody may hang
            for _, done in batch:
                if not done.done():
                    done.set_exception(exc)
            raise


class _Entry:
    """A waiting put of the threads' flavour: woken when stored, or to store a batch."""

    __slots__ = ("batch", "error", "params", "woken")

    def __init__(self, params: Params) -> None:
        self.params = params
        self.batch: list[_Entry] | None = None
        self.error: BaseException | None = None
        self.woken = threading.Lock()
        self.woken.acquire()  # released once: a bare lock is the cheapest one-shot signal


class PutCombiner:
    """The threads' flavour of `AsyncPutCombiner` (same arguments).

    No thread of its own: when a statement slot frees up, the oldest waiting put's thread
    is woken with a batch (its own put first) and stores it, then wakes the others. Each
    thread stores at most one batch, the one holding its own put, so none is kept busy
    with other threads' puts while its own run waits."""

    def __init__(
        self,
        limit: int,
        store_one: Callable[[Params], None],
        store_many: Callable[[Sequence[Params]], None],
    ) -> None:
        self._limit = max(1, limit)
        self._store_one, self._store_many = store_one, store_many
        self._running = 0
        self._lock = threading.Lock()
        self._waiting: Waiting = collections.deque()

    @property
    def waiting(self) -> int:
        """How many puts wait to go together now."""
        return len(self._waiting)

    def store(self, params: Params) -> None:
        """Store one put's parameters; returns once they are committed."""
        with self._lock:
            alone = not fits(params) or (self._running < self._limit and not self._waiting)
            if alone:
                self._running += 1
            else:
                entry = _Entry(params)
                self._waiting.append((params, entry))
                self._promote()
        if alone:
            try:
                self._store_one(params)
            finally:
                self._release()
            return
        entry.woken.acquire()
        if entry.batch is not None:
            try:
                self._store_batch(entry.batch)
            finally:
                self._release()
        if entry.error is not None:
            raise entry.error

    def _release(self) -> None:
        with self._lock:
            self._running -= 1
            self._promote()

    def _promote(self) -> None:
        """Hands waiting puts to their first put's thread while a slot is free (locked)."""
        while self._running < self._limit and (taken := take_batch(self._waiting)):
            self._running += 1
            leader: _Entry = taken[0][1]
            leader.batch = [entry for _, entry in taken]
            leader.woken.release()

    def _store_batch(self, batch: list[_Entry]) -> None:
        """Stores `batch` (its first put is this thread's), then wakes the others."""
        try:
            stored = False
            if len(batch) > 1:
                try:
                    self._store_many([entry.params for entry in batch])
                    stored = True
                except Exception:
                    pass  # one by one below: each put gets its own outcome
            if not stored:
                for entry in batch:
                    try:
                        self._store_one(entry.params)
                    except Exception as exc:
                        entry.error = exc
        except BaseException as exc:  # interrupted: nobody may wait for ever
            for entry in batch:
                entry.error = exc
            raise
        finally:
            for entry in batch[1:]:
                entry.woken.release()
