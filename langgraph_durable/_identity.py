"""Values kept per live object, found by the object's identity.

LangGraph gives each execution of a task objects of its own (a scratchpad; the list its
answers are matched from, shared by the in-process retries of that execution) and nothing
to hang our own bookkeeping on: they are neither hashable nor weak-referenceable. One
table (`OwnerTable`) keeps every such value, keyed by the object's `id()` with the object
alongside, so the id cannot be reused by another object while the entry lives. The table
is bounded, but only entries whose object nothing else holds any more (its execution
ended) are dropped, oldest first, a few looked at on each new entry: dropping a live
execution's counts would restart them, and give a later call an earlier call's ordinal
(its idempotency key, its event id). An object must be held by one entry only, else
none of its holders could ever tell that nothing else holds it: hence one table for all
of them, each user with a slot of its own in the object's entry. While more executions
than the capacity are alive, it grows.

`NamespaceOrigins` keeps, per subgraph namespace, where the task that entered it ran, for
as long as that task's execution lives.
"""

from __future__ import annotations

import sys
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, Generic, NamedTuple, TypeVar

__all__ = [
    "NAMESPACE_ORIGINS",
    "OWNERS",
    "CallCounts",
    "FirstCallers",
    "FirstSeen",
    "NamespaceOrigins",
    "Origin",
    "OwnerTable",
    "ancestor_origins",
    "plain",
]

V = TypeVar("V")

_HELD_BY_ENTRY_ONLY = 2
"""`sys.getrefcount` of an entry's object held by nothing but the entry popped into a
local: the entry's tuple, and the call's own argument."""


class OwnerTable:
    """Per live object (its owner): one dict of slots, one per user of the table."""

    def __init__(self, capacity: int = 4096) -> None:
        self.lock = threading.RLock()
        self._capacity = capacity
        self._entries: OrderedDict[int, tuple[object, dict[object, Any]]] = OrderedDict()
        self._on_drop: list[Callable[[dict[object, Any]], None]] = []

    def __len__(self) -> int:
        return len(self._entries)

    def on_drop(self, hook: Callable[[dict[object, Any]], None]) -> None:
        """Call `hook(slots)` for each entry dropped (its owner's execution ended)."""
        self._on_drop.append(hook)

    def slot(self, owner: object, slot: object, make: Callable[[], V]) -> V:
        """The value in `owner`'s slot `slot`, made now if there is none (hold `lock`)."""
        entry = self._entries.get(id(owner))
        if entry is None or entry[0] is not owner:
            self._look_at_oldest()
            entry = (owner, {})
            self._entries[id(owner)] = entry
            if len(self._entries) > self._capacity:
                self._drop_ended()
        slots = entry[1]
        if slot not in slots:
            slots[slot] = make()
        value: V = slots[slot]
        return value

    def _look_at_oldest(self, entries: int = 2) -> None:
        """Drop the oldest entries if their executions ended, else move them to the back.

        On every new entry, so the table holds a small multiple of the executions alive
        now (about 2-3x) rather than the last `capacity` ones: an ended execution's
        scratchpad holds its answers and the writes loaded with its checkpoint (the
        outputs of the tasks beside it), which stayed alive until 4,096 other executions
        had come. Two per new entry drop ended ones faster than they come."""
        for _ in range(min(entries, len(self._entries))):
            self._drop_oldest_if_ended()

    def _drop_ended(self) -> None:
        """Drop the oldest entries whose owner only this table holds, down to the
        capacity; entries of live owners go to the back. If every owner is alive, the
        capacity doubles, so that the next insert does not scan them all again."""
        for _ in range(len(self._entries)):
            if len(self._entries) <= self._capacity:
                return
            self._drop_oldest_if_ended()
        if len(self._entries) > self._capacity:
            self._capacity *= 2

    def _drop_oldest_if_ended(self) -> None:
        """The oldest entry: dropped if only this table holds its owner, else moved to
        the back."""
        key, entry = self._entries.popitem(last=False)
        if sys.getrefcount(entry[0]) > _HELD_BY_ENTRY_ONLY:
            self._entries[key] = entry  # still alive: keep it, at the back
        else:
            for hook in self._on_drop:
                hook(entry[1])


OWNERS = OwnerTable()
"""The table every per-execution value of this process lives in."""


class CallCounts:
    """Per owner (a task execution's scratchpad), per name: how many calls came before."""

    def __init__(self, table: OwnerTable | None = None) -> None:
        self._table = OWNERS if table is None else table

    def next(self, owner: object, name: str) -> int:
        """The ordinal of this call of `name` for `owner`: 0 for the first."""
        with self._table.lock:
            counts: dict[str, int] = self._table.slot(owner, self, dict)
            ordinal = counts.get(name, 0)
            counts[name] = ordinal + 1
            return ordinal


class FirstCallers:
    """Per owner (a task execution's scratchpad), per name: who made the first call (a
    thread, and an asyncio task in it), to tell when calls come from several at once."""

    def __init__(self, table: OwnerTable | None = None) -> None:
        self._table = OWNERS if table is None else table

    def another(self, owner: object, name: str, caller: object) -> bool:
        """Whether an earlier call of `name` for `owner` came from another caller; the
        first call's caller is kept."""
        with self._table.lock:
            first: dict[str, object] = self._table.slot(owner, self, dict)
            return first.setdefault(name, caller) != caller


class FirstSeen(Generic[V]):
    """Per owner: a value taken the first time the owner was seen, the same ever after."""

    def __init__(self, table: OwnerTable | None = None) -> None:
        self._table = OWNERS if table is None else table

    def value(self, owner: object, make: Callable[[], V]) -> V:
        with self._table.lock:
            return self._table.slot(owner, self, make)


Origin = tuple[str, int, Any]
"""(node, step, path) of the task that entered a subgraph namespace: what survives a crash
(its task id does not under "async" and "exit" durability)."""


class NamespaceOrigins:
    """Per (thread, subgraph namespace with task ids): where the task that entered it ran.

    A subgraph's tasks see their own node, step and path, not those of the parent task
    that runs the subgraph: two `Send` items into one subgraph, or a loop in the parent
    running it again, look alike from inside. The saver records the parent task's place
    when the subgraph's loop reads its checkpoint on entry (`_langgraph.subgraph_entry`:
    `get_tuple`, or `list` when it replays from an earlier checkpoint), before any of its
    tasks runs; effects and events look it up to tell those executions apart. An entry
    lives as long as the parent task's execution (its scratchpad, in `OWNERS`), however
    long the subgraph runs: a lost entry would change the keys of the effects after it.

    It also undoes what a retry does to a namespace. LangGraph numbers the subgraphs one
    task execution starts (`node:id`, then `node:id|1`, `node:id|2`), and its in-process
    retries (`RetryPolicy`) go on counting: the first subgraph of a second attempt ran as
    `node:id|1`, its effects got other keys than the first attempt's, and they acted
    again. Each attempt's numbers are shifted back by what earlier attempts used (the
    first number each attempt started, against the first attempt's), so an attempt's
    namespaces are the first attempt's (`normalize`). A first attempt's are left as they
    are, as is the number of a subgraph whose entry no saver of ours saw (one compiled
    with `checkpointer=False`).
    """

    def __init__(self, table: OwnerTable | None = None) -> None:
        self._table = OWNERS if table is None else table
        self._found: dict[tuple[str, str], Origin] = {}
        # Per (thread, parent task's namespace): its subgraphs' namespaces put back.
        self._renamed: dict[tuple[str, str], dict[str, str]] = {}
        self._table.on_drop(self._forget)

    def enter(
        self,
        thread_id: str,
        parent_namespace: str,
        level: int,
        origin: Origin,
        parent: object,
        counter: object | None = None,
    ) -> None:
        """A subgraph starts: the `level`-th one (from 0) the parent task execution
        started, over all its attempts; `parent` is this attempt's scratchpad, `counter`
        the object all its attempts share. Kept while `parent` lives."""
        with self._table.lock:
            group = (thread_id, parent_namespace)
            index = level
            if counter is not None:
                first_of_all: dict[str, int] = self._table.slot(counter, _BASE_LEVEL, dict)
                if not first_of_all:
                    # A new execution of the parent task (its task id comes back after an
                    # interrupt, a retried run): what earlier ones put back is not its own.
                    self._renamed.pop(group, None)
                first_here: dict[str, int] = self._table.slot(parent, _FIRST_LEVEL, dict)
                base = first_of_all.setdefault("level", level)
                index = level - (first_here.setdefault("level", level) - base)
                if index < 0:
                    # Subgraphs of one attempt started at once, in another order than the
                    # numbers LangGraph gave them: left as numbered (they need key=, as
                    # effects called at once in one node do).
                    index = level
            namespace = parent_namespace if level == 0 else f"{parent_namespace}|{level}"
            normalized = self.normalize(thread_id, parent_namespace)
            if index:
                normalized = f"{normalized}|{index}"
            found, renamed = self._table.slot(parent, self, _Mine.empty)
            if level:
                # Recorded even when unchanged: the newest entry of a namespace wins.
                renamed[(group, namespace)] = normalized
                self._renamed.setdefault(group, {})[namespace] = normalized
            if index == 0:
                # As before retries were undone: only a task's first subgraph carries its
                # origin (the later ones' numbers tell them apart).
                key = (thread_id, normalized)
                found[key] = self._found[key] = origin

    def normalize(self, thread_id: str, namespace: str) -> str:
        """`namespace` (with task ids) with every subgraph number a retry shifted put back
        to the first attempt's."""
        if "|" not in namespace:
            return namespace
        with self._table.lock:
            if not self._renamed:
                return namespace
            levels = namespace.split("|")
            out: list[str] = []
            for i, level in enumerate(levels):
                if i and level.isdigit():
                    group = self._renamed.get((thread_id, "|".join(levels[:i])))
                    renamed = group.get("|".join(levels[: i + 1])) if group else None
                    if renamed is not None:
                        out = renamed.split("|")
                        continue
                out.append(level)
            return "|".join(out)

    def find(self, thread_id: str, namespace: str) -> Origin | None:
        with self._table.lock:
            return self._found.get((thread_id, namespace))

    def _forget(self, slots: dict[object, Any]) -> None:
        """The parent's execution ended: its subgraphs' entries go (a new execution that
        enters them again records them again)."""
        mine: _Mine | None = slots.get(self)
        if mine is None:
            return
        for key, origin in mine.found.items():
            if self._found.get(key) is origin:
                del self._found[key]
        for (group, namespace), normalized in mine.renamed.items():
            names = self._renamed.get(group)
            if names is not None and names.get(namespace) is normalized:
                del names[namespace]
                if not names:
                    del self._renamed[group]


class _Mine(NamedTuple):
    """What one parent task execution recorded: origins, and namespaces put back."""

    found: dict[tuple[str, str], Origin]
    renamed: dict[tuple[tuple[str, str], str], str]

    @classmethod
    def empty(cls) -> _Mine:
        return cls({}, {})


_FIRST_LEVEL = object()
"""The slot of an attempt's scratchpad holding the first subgraph number it started."""

_BASE_LEVEL = object()
"""The slot of a task execution's subgraph counter holding the first subgraph number its
first attempt that started any started."""


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
    outermost first, None for a level whose entry no saver of ours recorded (a subgraph
    without a checkpointer, or another checkpointer). Empty for a task of the root
    graph."""
    levels = NAMESPACE_ORIGINS.normalize(thread_id, namespace).split("|")
    found: list[list[Any] | None] = []
    for depth in range(1, len(levels)):
        origin = NAMESPACE_ORIGINS.find(thread_id, "|".join(levels[:depth]))
        found.append(None if origin is None else [origin[0], origin[1], plain(origin[2])])
    return found
