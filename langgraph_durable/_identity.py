"""Values kept per live object, found by the object's identity.

LangGraph gives each execution of a task objects of its own (a scratchpad; the list its
answers are matched from, shared by the in-process retries of that execution) and nothing
to hang our own bookkeeping on: they are neither hashable nor weak-referenceable. Entries
are keyed by `id()` with the object kept alongside, so the id cannot be reused by another
object while the entry lives; the map is bounded, oldest entries dropped first (an entry
outlives its execution only to be dropped later).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Generic, TypeVar

__all__ = ["CallCounts", "FirstSeen"]

V = TypeVar("V")


class _ByIdentity(Generic[V]):
    def __init__(self, capacity: int) -> None:
        self._lock = threading.Lock()
        self._capacity = capacity
        self._entries: OrderedDict[int, tuple[object, V]] = OrderedDict()

    def _value(self, owner: object, make: Callable[[], V]) -> V:
        """The value kept for `owner`, made now if there is none (hold the lock)."""
        entry = self._entries.get(id(owner))
        if entry is None or entry[0] is not owner:
            entry = (owner, make())
            self._entries[id(owner)] = entry
            while len(self._entries) > self._capacity:
                self._entries.popitem(last=False)
        return entry[1]


class CallCounts(_ByIdentity[dict[str, int]]):
    """Per owner (a task execution's scratchpad), per name: how many calls came before."""

    def __init__(self, capacity: int = 4096) -> None:
        super().__init__(capacity)

    def next(self, owner: object, name: str) -> int:
        """The ordinal of this call of `name` for `owner`: 0 for the first."""
        with self._lock:
            counts = self._value(owner, dict)
            ordinal = counts.get(name, 0)
            counts[name] = ordinal + 1
            return ordinal


class FirstSeen(_ByIdentity[V]):
    """Per owner: a value taken the first time the owner was seen, the same ever after."""

    def __init__(self, capacity: int = 4096) -> None:
        super().__init__(capacity)

    def value(self, owner: object, make: Callable[[], V]) -> V:
        with self._lock:
            return self._value(owner, make)
