"""Values kept per live object, found by the object's identity.

LangGraph gives each execution of a task objects of its own (a scratchpad; the list its
answers are matched from, shared by the in-process retries of that execution) and nothing
to hang our own bookkeeping on: they are neither hashable nor weak-referenceable. Entries
are keyed by `id()` with the object kept alongside, so the id cannot be reused by another
object while the entry lives. The map is bounded, but only entries whose object nothing
else holds any more (its execution ended) are dropped, oldest first: dropping a live
execution's counts would restart them, and give a later call an earlier call's ordinal
(its idempotency key, its event id). While more executions than that are alive at once,
the map grows.

`NamespaceOrigins` keeps, per subgraph namespace, where the task that entered it ran.
"""

from __future__ import annotations

import sys
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, Generic, TypeVar

__all__ = [
    "NAMESPACE_ORIGINS",
    "CallCounts",
    "FirstSeen",
    "NamespaceOrigins",
    "Origin",
    "ancestor_origins",
    "plain",
]

V = TypeVar("V")

_HELD_BY_ENTRY_ONLY = 2
"""`sys.getrefcount` of an entry's object held by nothing but the entry popped into a
local: the entry's tuple, and the call's own argument."""


class _ByIdentity(Generic[V]):
    def __init__(self, capacity: int) -> None:
        self._lock = threading.Lock()
        self._capacity = capacity
        self._entries: OrderedDict[int, tuple[object, V]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def _value(self, owner: object, make: Callable[[], V]) -> V:
        """The value kept for `owner`, made now if there is none (hold the lock)."""
        entry = self._entries.get(id(owner))
        if entry is None or entry[0] is not owner:
            entry = (owner, make())
            self._entries[id(owner)] = entry
            if len(self._entries) > self._capacity:
                self._drop_ended()
        return entry[1]

    def _drop_ended(self) -> None:
        """Drop the oldest entries whose object only the map holds, down to the capacity;
        entries of live objects go to the back. If every entry is alive, the capacity
        doubles, so that the next insert does not scan them all again."""
        for _ in range(len(self._entries)):
            if len(self._entries) <= self._capacity:
                return
            key, entry = self._entries.popitem(last=False)
            if sys.getrefcount(entry[0]) > _HELD_BY_ENTRY_ONLY:
                self._entries[key] = entry  # still alive: keep it, at the back
        if len(self._entries) > self._capacity:
            self._capacity *= 2


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


Origin = tuple[str, int, Any]
"""(node, step, path) of the task that entered a subgraph namespace: what survives a crash
(its task id does not under "async" and "exit" durability)."""


class NamespaceOrigins:
    """Per (thread, subgraph namespace with task ids): where the task that entered it ran.

    A subgraph's tasks see their own node, step and path, not those of the parent task
    that runs the subgraph: two `Send` items into one subgraph, or a loop in the parent
    running it again, look alike from inside. The saver records the parent task's place
    when the subgraph's loop reads its checkpoint on entry (`_langgraph.subgraph_entry`),
    before any of its tasks runs; effects and events look it up to tell those executions
    apart. Bounded, least recently used dropped first: an entry is read moments after it
    is made, and made again whenever the subgraph is entered again (a resume, a retry).
    """

    def __init__(self, capacity: int = 65536) -> None:
        self._lock = threading.Lock()
        self._capacity = capacity
        self._entries: OrderedDict[tuple[str, str], Origin] = OrderedDict()

    def record(self, thread_id: str, namespace: str, origin: Origin) -> None:
        with self._lock:
            self._entries[(thread_id, namespace)] = origin
            self._entries.move_to_end((thread_id, namespace))
            while len(self._entries) > self._capacity:
                self._entries.popitem(last=False)

    def find(self, thread_id: str, namespace: str) -> Origin | None:
        with self._lock:
            origin = self._entries.get((thread_id, namespace))
            if origin is not None:
                self._entries.move_to_end((thread_id, namespace))
            return origin


NAMESPACE_ORIGINS = NamespaceOrigins()


def plain(value: Any) -> Any:
    """A task path (or a part of one) as JSON-able data: tuples as lists, others as text."""
    if isinstance(value, (tuple, list)):
        return [plain(v) for v in value]
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return str(value)


def ancestor_origins(thread_id: str, namespace: str) -> list[list[Any] | None]:
    """For a task in `namespace` (with task ids: `outer:1f..|inner:9c..`, its own level
    last), where each subgraph around it was entered from: `[node, step, path]` per level,
    outermost first, None for a level whose entry this process has not seen (a subgraph
    without a checkpointer, or a saver other than ours). Empty for a task of the root
    graph."""
    levels = namespace.split("|")
    found: list[list[Any] | None] = []
    for depth in range(1, len(levels)):
        origin = NAMESPACE_ORIGINS.find(thread_id, "|".join(levels[:depth]))
        found.append(None if origin is None else [origin[0], origin[1], plain(origin[2])])
    return found
