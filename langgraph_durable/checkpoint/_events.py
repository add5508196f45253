"""Outbox events emitted by running tasks, parked until the statement that commits them.

`emit()` (in `outbox/`) parks an event here under the task that emitted it; the saver
takes it into the statement that stores that task's writes, so the event commits exactly
when the task's result does (invariant I7):

- under durability "sync" and "async", the task's own `put_writes` carries its events,
  whether that statement runs alone or the next checkpoint carries the parked writes;
  but a `put` can start before the `put_writes` of a task of the step it records
  (LangGraph submits both to its executor and orders only the puts), so the `put` of a
  step's checkpoint first waits until the tasks of the checkpoint it moves past have taken
  their events (`has_for_checkpoint`), then for their busy writes. `put_writes` counts
  itself busy before it takes its events, so a put never misses one between the two;
  the events stay with their task's writes, whatever happens to the put;
- writes that say the task did not finish (an error, an interrupt) drop its events: the
  task runs again and emits them again;
- a task's writes also take the events its subgraphs' tasks left parked, which no write
  of the subgraph stored: a node ending with `Command(graph=Command.PARENT)` (its update
  is the parent task's write), or a subgraph compiled without a checkpointer;
- under "exit", LangGraph stores nothing until the run ends; the final `put` carries the
  events of every task of the run except those of its own pending tasks, whose
  `put_writes` follow it (and carry or drop them as above);
- a task's first event of a new attempt (a retry policy) or of a new execution (the
  task run again on the same checkpoint after a run that did not finish it: cancelled, or
  stopped by a subgraph's static interrupt) voids the events of the ones before it. An
  execution that emits nothing leaves them (LangGraph tells neither the node nor the saver
  that an attempt failed), so they commit with its writes: a gap;
- an event emitted in an asyncio task that ends cancelled is dropped when it ends: a run
  cancelled mid-task (a timeout, a shutdown) never stores that task's writes, and
  LangGraph tells the saver nothing when it runs the step's only task in the caller's
  own task; a task's events that waited for its writes (those of subgraph tasks below
  it) go too. Kept, they stayed parked for as long as the process ran;
- nothing is dropped to make room: at `MAX_PARKED` events parked in the process, `emit()`
  is refused by name (`OutboxUnavailableError`), and the task fails without storing
  anything. A full parking used to be emptied, live tasks' events with it, and their
  writes then committed without them.

Pure bookkeeping behind one lock: calls come from worker threads (sync) or one loop.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import json
import logging
import threading
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from langgraph_durable._ids import holds_nul, is_text, lone_surrogate
from langgraph_durable.errors import OutboxUnavailableError

__all__ = [
    "EMPTY_EVENT_PARAMS",
    "MAX_PARKED",
    "EventParking",
    "ParkedEvent",
    "event_params",
    "new_event",
]

logger = logging.getLogger("langgraph_durable.outbox")

MAX_PARKED = 100_000
"""Events parked at most in one saver, waiting for their tasks' writes."""
_EMITTED = itertools.count()

EMPTY_EVENT_PARAMS: dict[str, list[Any]] = {
    "e_ids": [],
    "e_types": [],
    "e_keys": [],
    "e_payloads": [],
    "e_task_ids": [],
}


@dataclass(frozen=True)
class ParkedEvent:
    """An event a task emitted, not stored yet."""

    event_id: str
    event_type: str
    key: str
    payload: str
    """The payload as JSON text."""
    thread_id: str
    namespace: str
    """The namespace of the graph loop the task runs in."""
    checkpoint_id: str
    """The checkpoint the task runs on."""
    task_id: str
    attempt: int = 1
    fence_token: int | None = None
    """The fencing token of the run that emitted it (None without a lease): only a statement
    behind the same fence carries it."""
    execution: object = field(default=None, compare=False, repr=False)
    """The execution of the task that emitted it (its scratchpad, compared by identity;
    None if unknown): a task run again on the same checkpoint, after a run that did not
    finish it, is another execution. Held, not numbered: a bounded map of numbers could
    forget a long-running execution and take its later events for another's."""
    seq: int = field(default_factory=lambda: next(_EMITTED), compare=False, repr=False)
    """Emission order in this process: events of a task and of the subgraph tasks below
    it, taken together, keep the order they were emitted in."""
    emitter: asyncio.Task[Any] | None = field(default=None, compare=False, repr=False)
    """The asyncio task `emit()` ran in (None outside one): if it ends cancelled, the
    event is dropped (`EventParking`)."""


ParkingKey = tuple[str, str, str, int | None]
"""(thread, checkpoint, task, fencing token): where a task's events are parked."""


def _current_task() -> asyncio.Task[Any] | None:
    try:
        return asyncio.current_task()
    except RuntimeError:  # no event loop in this thread (a sync node)
        return None


def new_event(
    event_type: str,
    payload: Any,
    key: str,
    *,
    thread_id: str = "",
    namespace: str = "",
    checkpoint_id: str = "",
    task_id: str = "",
    attempt: int = 1,
    event_id: str | None = None,
    fence_token: int | None = None,
    execution: object = None,
) -> ParkedEvent:
    """Checks an event and gives it `event_id` or a new one; ValueError or TypeError if bad."""
    if not event_type or not is_text(event_type):
        raise ValueError(
            f"event type {event_type!r}: give a non-empty string without NUL or lone surrogates"
        )
    if not is_text(key):
        raise ValueError(f"event key {key!r}: give a string without NUL or lone surrogates")
    text = json.dumps(payload, allow_nan=False, ensure_ascii=False)
    if holds_nul(text):
        raise ValueError("the payload holds a NUL character, which Postgres JSON cannot store")
    if lone_surrogate(text) is not None:
        raise ValueError(
            "the payload holds a lone surrogate, which is not valid text; decode the text "
            "properly (e.g. errors='replace') first"
        )
    return ParkedEvent(
        event_id or str(uuid.uuid4()),
        event_type,
        key,
        text,
        thread_id,
        namespace,
        checkpoint_id,
        task_id,
        attempt,
        fence_token,
        execution,
    )


def event_params(events: Iterable[ParkedEvent]) -> dict[str, list[Any]]:
    """The `e_*` arrays of the statements that store events."""
    params: dict[str, list[Any]] = {name: [] for name in EMPTY_EVENT_PARAMS}
    for event in events:
        params["e_ids"].append(event.event_id)
        params["e_types"].append(event.event_type)
        params["e_keys"].append(event.key)
        params["e_payloads"].append(event.payload)
        params["e_task_ids"].append(event.task_id or None)
    return params


def _ran_in(namespace: str, marker: str) -> bool:
    """Whether a segment of `namespace` ("node:task_id") ends with `marker` (":task_id"):
    the loop of the namespace ran inside that task."""
    return any(part.endswith(marker) for part in namespace.split("|"))


def _under(namespace: str, root: str) -> bool:
    return not root or namespace == root or namespace.startswith(root + "|")


class EventParking:
    """Events parked per (thread, checkpoint, task, fencing token) until their task's writes
    are stored. The token keeps two holders of one thread in one process apart (a stale
    run and the one that took over): each statement carries only the events behind its
    own fence."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._parked: dict[ParkingKey, list[ParkedEvent]] = {}
        self._count = 0
        self._tasks: dict[tuple[str, str, int | None], int] = {}
        """Tasks with parked events, per (thread, checkpoint, fencing token)."""
        self._of_thread: dict[str, dict[ParkingKey, None]] = {}
        """The keys of `_parked` per thread, in the order they came: the searches below a
        task and at exit look at one thread's events, not at every thread's."""
        self._by_emitter: dict[asyncio.Task[Any], set[ParkingKey]] = {}
        """Per asyncio task that emitted (and is watched: `_emitter_done`), the keys it
        may have events under."""

    def park(self, event: ParkedEvent) -> None:
        """Park a task's event until its writes are stored.

        Raises:
            OutboxUnavailableError: `MAX_PARKED` events are parked already; nothing is
                parked, nothing is dropped.
        """
        key = (event.thread_id, event.checkpoint_id, event.task_id, event.fence_token)
        emitter = _current_task()
        if emitter is not None:
            event = dataclasses.replace(event, emitter=emitter)
        with self._lock:
            events = self._parked.get(key)
            void = events is not None and (
                events[-1].execution is not event.execution or events[-1].attempt != event.attempt
            )
            if self._count - (len(events) if events and void else 0) >= MAX_PARKED:
                raise OutboxUnavailableError(
                    f"emit() refused: {self._count:,} outbox events are parked in this process "
                    "by tasks whose writes are not stored yet, the most it holds. Nothing was "
                    "dropped; this task fails. Emit fewer events per task (one event can carry "
                    "a list), or store many with emit_txn(conn, ...) in your own transaction."
                )
            if events is None:
                events = self._parked[key] = []
                where = (key[0], key[1], key[3])
                self._tasks[where] = self._tasks.get(where, 0) + 1
                self._of_thread.setdefault(key[0], {})[key] = None
            elif void:
                # Another execution of the task (a run after one that did not finish it) or
                # a new attempt (a retry): the earlier one's events are void. Left parked,
                # they would commit with this one's writes, and take the place of this
                # one's events under the same ids.
                self._count -= len(events)
                events.clear()
            events.append(event)
            self._count += 1
            if emitter is not None:
                keys = self._by_emitter.get(emitter)
                if keys is None:
                    keys = self._by_emitter[emitter] = set()
                    emitter.add_done_callback(self._emitter_done)  # once per task
                keys.add(key)

    def _emitter_done(self, emitter: asyncio.Task[Any]) -> None:
        """An asyncio task that emitted has ended; if it was cancelled, the events it
        emitted are dropped: none of them will ever be stored. Only its own: the events
        others parked under the same task, or below it (a subgraph's), go with that
        task's writes if they commit (a node whose helper task was cancelled carries on,
        and its subgraph's events must not go missing)."""
        dropped = 0
        with self._lock:
            keys = self._by_emitter.pop(emitter, set())
            if not emitter.cancelled():
                return
            for key in keys:
                events = self._parked.get(key)
                if events is None:
                    continue
                kept = [event for event in events if event.emitter is not emitter]
                if kept:
                    dropped += len(events) - len(kept)
                    self._count -= len(events) - len(kept)
                    events[:] = kept
                else:
                    dropped += len(self._pop(key))
        if dropped:
            logger.debug("dropped %d parked outbox event(s) of a cancelled task", dropped)

    def _pop(self, key: ParkingKey) -> list[ParkedEvent]:
        """Takes one task's events (the caller holds the lock)."""
        events = self._parked.pop(key, None)
        if events is None:
            return []
        for event in events:
            if event.emitter is not None and event.emitter in self._by_emitter:
                self._by_emitter[event.emitter].discard(key)
        where = (key[0], key[1], key[3])
        left = self._tasks[where] - 1
        if left:
            self._tasks[where] = left
        else:
            del self._tasks[where]
        keys = self._of_thread[key[0]]
        del keys[key]
        if not keys:
            del self._of_thread[key[0]]
        self._count -= len(events)
        return events

    def take_for_task(
        self, thread_id: str, checkpoint_id: str, task_id: str, *, fence_token: int | None
    ) -> list[ParkedEvent]:
        """The events of one task, for the statement that stores its writes, with those
        still parked by the tasks of subgraphs it ran (namespaces below it).

        A subgraph task's own writes take its events; what is left below a finished task
        was never stored by a write of the subgraph: a node that ended with
        `Command(graph=Command.PARENT)`, whose update is this task's write, or a subgraph
        compiled without a checkpointer.
        """
        if not self._parked:  # no outbox in use: the common case, without the lock
            return []
        with self._lock:
            key = (thread_id, checkpoint_id, task_id, fence_token)
            events = self._pop(key)
            below = self._pop_below(key)
            if below:
                for more in below:
                    events += more
                events.sort(key=lambda event: event.seq)
        return events

    def _pop_below(self, key: ParkingKey) -> list[list[ParkedEvent]]:
        """Takes the events of the subgraph tasks that ran inside task `key` (namespaces
        below it, behind the same fence); the caller holds the lock."""
        thread_id, _, task_id, fence_token = key
        if thread_id not in self._of_thread:
            return []
        marker = ":" + task_id
        below = [
            found
            for found in self._of_thread[thread_id]
            if found[3] == fence_token
            and self._parked[found]
            and marker in self._parked[found][0].namespace
            and _ran_in(self._parked[found][0].namespace, marker)
        ]
        return [self._pop(found) for found in below]

    def has_for_checkpoint(
        self, thread_id: str, checkpoint_id: str, fence_token: int | None
    ) -> bool:
        """Whether a task that ran on the checkpoint (behind the fence) has events parked:
        its `put_writes` has not taken them yet, so the `put` moving past waits for it."""
        return bool(self._tasks) and (thread_id, checkpoint_id, fence_token) in self._tasks

    def take_for_exit(
        self, thread_id: str, namespace: str, checkpoint_id: str, *, fence_token: int | None
    ) -> list[ParkedEvent]:
        """Events a final checkpoint under durability="exit" carries.

        Those of tasks in `namespace` (or below it) that ran on earlier checkpoints of the
        run: their steps completed. Tasks of `checkpoint_id` itself are still pending; their
        `put_writes` follows the checkpoint.
        """
        taken: list[ParkedEvent] = []
        with self._lock:
            for key in [
                key
                for key in self._of_thread.get(thread_id, ())
                if key[1] != checkpoint_id
                and key[3] == fence_token
                and self._parked[key]
                and _under(self._parked[key][0].namespace, namespace)
            ]:
                taken += self._pop(key)
        # Checkpoint ids sort in time order; the sort is stable, so a task's order stays.
        taken.sort(key=lambda event: event.checkpoint_id)
        return taken
