"""Writes of finished tasks parked for a moment, so the next checkpoint can carry them.

Storing a step used to take two commits in series: the finished task's writes
(`put_writes`), then the checkpoint that moves past them (`put`), which must wait for those
writes (invariant I4). LangGraph submits that `put` a fraction of a millisecond after the
writes, so `put_writes` parks regular writes here for up to `linger` seconds. A `put` whose
parent (or, at exit, whose own checkpoint) they belong to takes them into its own
statement: one commit per step, and a reader sees the checkpoint and those writes together
or not at all.

Writes no `put` takes in time are stored alone, as before, and `put` waits for those.
Writes LangGraph itself waits for are never parked (`_core.may_park`): special writes
(errors, interrupts, resumes), the error-source marker, and `DeltaChannel` writes, which
the next checkpoint's save waits for; parked, they would hold every step for the linger.

If the `put` that took writes fails, `put_writes` raises its error: the writes were not
stored, exactly as if their own statement had failed.

A hand-written pair, like `effects/_heartbeat.py`: waiting with a timeout is written
differently for asyncio and for threads.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

__all__ = ["AsyncWriteParking", "ParkedWrites", "WriteKey", "WriteParking"]

WriteKey = tuple[str, str, str]
"""(thread_id, checkpoint_ns, checkpoint_id) the writes belong to."""

_PARKED, _TAKEN = "parked", "taken"


class _Signal(Protocol):
    """`_Released` or `asyncio.Event`: set once the carrying `put` has finished."""

    def set(self) -> None: ...


@dataclass(eq=False)
class ParkedWrites:
    """One `put_writes` call's parameters, parked until a `put` takes them or time is up."""

    params: dict[str, Any]
    stored: _Signal
    state: str = _PARKED
    error: BaseException | None = None


class _Registry:
    """The bookkeeping both flavours share; callers hold the flavour's lock."""

    def __init__(self, linger: float) -> None:
        self.linger = linger
        self.parked: dict[WriteKey, list[ParkedWrites]] = {}
        self.alone: dict[WriteKey, int] = {}

    def park(self, key: WriteKey, params: dict[str, Any], stored: _Signal) -> ParkedWrites:
        entry = ParkedWrites(params, stored)
        self.parked.setdefault(key, []).append(entry)
        return entry

    def unpark(self, key: WriteKey, entry: ParkedWrites) -> bool:
        """Takes `entry` back if no `put` has; True when its writes are the caller's again."""
        if entry.state != _PARKED:
            return False
        waiting = self.parked[key]
        waiting.remove(entry)
        if not waiting:
            del self.parked[key]
        return True

    def take(self, keys: Sequence[WriteKey]) -> list[ParkedWrites]:
        taken = [entry for key in keys for entry in self.parked.pop(key, ())]
        for entry in taken:
            entry.state = _TAKEN
        return taken

    def enter_alone(self, key: WriteKey) -> None:
        self.alone[key] = self.alone.get(key, 0) + 1

    def leave_alone(self, key: WriteKey) -> None:
        left = self.alone[key] - 1
        if left:
            self.alone[key] = left
        else:
            del self.alone[key]

    def none_alone(self, keys: Sequence[WriteKey]) -> bool:
        return not any(key in self.alone for key in keys)


def settle(taken: Sequence[ParkedWrites], error: BaseException | None = None) -> None:
    """Tells the parked callers that the `put` carrying their writes committed or failed."""
    for entry in taken:
        entry.error = error
        entry.stored.set()


class AsyncWriteParking:
    """Parking for `AsyncDurablePostgresSaver`; every call runs on the saver's loop."""

    def __init__(self, linger: float) -> None:
        self._registry = _Registry(linger)
        self._changed = asyncio.Condition()

    async def store(
        self,
        key: WriteKey,
        params: dict[str, Any],
        store_alone: Callable[[], Awaitable[None]],
        *,
        park: bool,
    ) -> None:
        """Parks the writes for a `put` to take; stores them alone if none does in time."""
        registry = self._registry
        if park and registry.linger > 0:
            stored = asyncio.Event()
            entry = registry.park(key, params, stored)
            try:
                await asyncio.wait_for(stored.wait(), registry.linger)
            except asyncio.TimeoutError:
                pass
            finally:
                # Also on cancellation: writes nobody waits for must not stay parked.
                alone = registry.unpark(key, entry)
            if not alone:
                await stored.wait()
                if entry.error is not None:
                    raise entry.error
                return
        registry.enter_alone(key)
        try:
            await store_alone()
        finally:
            async with self._changed:
                registry.leave_alone(key)
                self._changed.notify_all()

    async def take(self, keys: Sequence[WriteKey]) -> list[ParkedWrites]:
        """Takes the writes parked under `keys`; waits for those being stored alone (I4)."""
        taken = self._registry.take(keys)
        async with self._changed:
            await self._changed.wait_for(lambda: self._registry.none_alone(keys))
        return taken


class _Released:
    """A one-shot signal on a bare lock, for one waiting thread.

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


class WriteParking:
    """Parking for `DurablePostgresSaver`; calls come from LangGraph's worker threads."""

    def __init__(self, linger: float) -> None:
        self._registry = _Registry(linger)
        self._changed = threading.Condition()

    def store(
        self,
        key: WriteKey,
        params: dict[str, Any],
        store_alone: Callable[[], None],
        *,
        park: bool,
    ) -> None:
        """Parks the writes for a `put` to take; stores them alone if none does in time."""
        registry = self._registry
        with self._changed:
            if park and registry.linger > 0:
                stored = _Released()
                entry = registry.park(key, params, stored)
            else:
                entry = None
                registry.enter_alone(key)
        if entry is not None:
            stored.wait(registry.linger)
            with self._changed:
                alone = registry.unpark(key, entry)
                if alone:
                    registry.enter_alone(key)
            if not alone:
                stored.wait()
                if entry.error is not None:
                    raise entry.error
                return
        try:
            store_alone()
        finally:
            with self._changed:
                registry.leave_alone(key)
                self._changed.notify_all()

    def take(self, keys: Sequence[WriteKey]) -> list[ParkedWrites]:
        """Takes the writes parked under `keys`; waits for those being stored alone (I4)."""
        with self._changed:
            taken = self._registry.take(keys)
            self._changed.wait_for(lambda: self._registry.none_alone(keys))
        return taken
