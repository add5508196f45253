"""`emit()`: an outbox event from inside a node or a `@task`, committed with its writes.

The event is parked in the graph's saver under the emitting task and stored by the
statement that stores that task's writes (see `checkpoint/_events.py` for every
durability mode). It is not stored when the task fails or is interrupted: the task runs
again and emits it again.

The event id is derived, like an effect's default key, from what survives a crash: the
thread, the namespace without task ids, the step, the task path, inside a subgraph where
each parent task that entered it ran (`_identity.ancestor_origins`: else two `Send` items
into one subgraph would emit under one id, and the second's events would be dropped), the
event type, the ordinal of this `emit` of that type in the task execution, and in a run
of the run registry its run id (a run after a `"rollback"` goes through the same steps as
the run it rolled back: its events are its own). Under
durability "async" a task's writes can commit against a checkpoint that a crash then
loses; the task runs again on resume and emits the same ids, which the outbox stores once
(a unique id).

So an id repeats exactly when the same task path, in the same thread and namespace,
emits the same type for the same n-th time at the same step, whatever the payload, and
the outbox keeps the event first stored under it. Beyond crash recovery that covers:
every replay or fork from one checkpoint (`invoke(None, config)` with its
`checkpoint_id`, or `update_state` on it then `invoke`) runs the next tasks at the same
step, one later than the original run did (LangGraph first writes a fork or update
checkpoint), so the first such re-run's events get ids new to the original run, and
every later re-run from that checkpoint derives the same ids again: its events are
dropped, silently, even with other payloads. A re-run reaching a step at which the same
node emitted on another branch of the thread repeats those ids too. A fork whose events
must all go out runs on its own thread (`copy_thread`, then fork the copy). So does a
thread id used again after its thread was deleted (`delete_thread`, `prune(...,
strategy="delete")`, `delete_idle_threads`) by a graph invoked outside the run registry:
its first steps emit the deleted history's ids, and those events are dropped; a registry
run on it has ids of its own.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.config import get_config

from langgraph_durable import _langgraph
from langgraph_durable._fencing import fence_of, fence_token_of
from langgraph_durable._identity import NAMESPACE_ORIGINS, CallCounts, ancestor_origins, plain
from langgraph_durable.checkpoint import (
    AsyncDurablePostgresSaver,
    DurablePostgresSaver,
    ParkedEvent,
    new_event,
)
from langgraph_durable.errors import InvalidEventError, OutboxUnavailableError

__all__ = ["checked_event", "emit"]

_NAMESPACE = uuid.UUID("6f0c1f38-4a0e-4c55-9a57-0c2b7e3d5a11")


# Per task execution (its scratchpad object), per event type: emits so far; the same
# scheme as effect keys (`effects/_keys.py`).
_ORDINALS = CallCounts()


def derived_event_id(config: RunnableConfig, thread_id: str, event_type: str) -> str:
    """The id of this emit: stable across re-runs of the same task execution point."""
    configurable: Mapping[str, Any] = config.get("configurable") or {}
    metadata: Mapping[str, Any] = config.get("metadata") or {}
    full_namespace = str(configurable.get("checkpoint_ns") or "")
    namespace = "|".join(
        part.split(":", 1)[0]
        for part in NAMESPACE_ORIGINS.normalize(thread_id, full_namespace).split("|")
    )
    scratchpad = _langgraph.scratchpad_of(config)
    if scratchpad is None:
        return str(uuid.uuid4())
    where: list[Any] = [
        thread_id,
        namespace,
        plain(metadata.get("langgraph_step")),
        plain(metadata.get("langgraph_path")),
        event_type,
        _ORDINALS.next(scratchpad, event_type) + 1,
    ]
    origins = ancestor_origins(thread_id, full_namespace)
    if any(o is not None for o in origins):  # a root task's id is what it always was
        where.append(origins)
    fence = fence_of(config)
    if fence is not None and fence.run_id is not None:
        # A registry run's events are its own, and its id survives a worker's crash (the
        # next worker resumes the same run): a run after a rollback goes through the same
        # steps as the run it rolled back, and its events were dropped under that run's
        # ids, though its effects act again for its own input.
        where.append({"run": fence.run_id})
    material = json.dumps(where, separators=(",", ":"))
    return str(uuid.uuid5(_NAMESPACE, material))


def checked_event(event_type: str, payload: Any, key: str, **where: Any) -> ParkedEvent:
    """A new event with a fresh id, or `InvalidEventError` saying what to change.

    A payload nested deeper than Python's recursion limit (about a thousand levels) makes
    `json.dumps` raise RecursionError, which reached the caller raw."""
    try:
        return new_event(event_type, payload, key, **where)
    except (TypeError, ValueError) as exc:
        raise InvalidEventError(f"outbox event {event_type!r} refused: {exc}") from exc
    except RecursionError as exc:
        raise InvalidEventError(
            f"outbox event {event_type!r} refused: its payload is nested too deeply to "
            "encode as JSON; send a flatter one"
        ) from exc


def emit(event_type: str, payload: Any, *, key: str | None = None) -> str:
    """Emit an outbox event from the running node or `@task`; returns its event id.

    The event commits in the transaction that stores this task's writes (or the
    checkpoint that carries them), in every durability mode, and never before: a task
    that fails or is interrupted emits nothing, and a task whose writes committed does
    not run, so does not emit, again. A relay publishes it afterwards with the event id as
    the message id.

    Args:
        event_type: What happened, e.g. "order.shipped".
        payload: JSON-serializable data. It is stored as Postgres jsonb, and consumers
            receive it as jsonb normalizes it (README "Payloads"): keys in jsonb's order,
            a whole float written with an exponent (1e20) as an int, -0.0 as 0.0.
        key: Events of one key are published in order; the thread id when not given.

    Raises:
        OutboxUnavailableError: Called outside a node, or the graph's saver is not durable,
            or the saver holds `MAX_PARKED` (100,000) events whose tasks' writes are not
            stored yet (nothing is dropped to make room: the task fails).
        InvalidEventError: The type, key or payload cannot be stored.
    """
    try:
        config = get_config()
    except RuntimeError as exc:
        raise OutboxUnavailableError(
            "emit() was called outside a running node or @task; from your own code use "
            "emit_txn(conn, ...) inside your transaction."
        ) from exc
    saver = _langgraph.checkpointer_of(config)
    if not isinstance(saver, (DurablePostgresSaver, AsyncDurablePostgresSaver)):
        raise OutboxUnavailableError(
            f"emit() needs a graph compiled with a durable saver, not {type(saver).__name__}: "
            "compile it with DurablePostgresSaver or AsyncDurablePostgresSaver."
        )
    where = _langgraph.task_checkpoint_of(config)
    task_id = _langgraph.task_id_of(config)
    thread_id = str(config.get("configurable", {}).get("thread_id", ""))
    if where is None or task_id is None or not thread_id:
        raise OutboxUnavailableError(
            "emit() found no task of a checkpointed run here; call it inside a node or @task "
            "of a graph invoked with a thread_id."
        )
    event = checked_event(
        event_type,
        payload,
        thread_id if key is None else key,
        thread_id=thread_id,
        namespace=where[0],
        checkpoint_id=where[1],
        task_id=task_id,
        attempt=_langgraph.task_attempt_of(config),
        event_id=derived_event_id(config, thread_id, event_type),
        fence_token=fence_token_of(config),
        execution=_langgraph.scratchpad_of(config),
    )
    saver.park_event(event)
    return event.event_id
