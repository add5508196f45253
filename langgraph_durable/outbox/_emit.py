"""`emit()`: an outbox event from inside a node or a `@task`, committed with its writes.

The event is parked in the graph's saver under the emitting task and stored by the
statement that stores that task's writes (see `checkpoint/_events.py` for every
durability mode). It is not stored when the task fails or is interrupted: the task runs
again and emits it again.
"""

from __future__ import annotations

from typing import Any

from langgraph.config import get_config

from langgraph_durable import _langgraph
from langgraph_durable.checkpoint import (
    AsyncDurablePostgresSaver,
    DurablePostgresSaver,
    ParkedEvent,
    new_event,
)
from langgraph_durable.errors import InvalidEventError, OutboxUnavailableError

__all__ = ["checked_event", "emit"]


def checked_event(event_type: str, payload: Any, key: str, **where: Any) -> ParkedEvent:
    """A new event with a fresh id, or `InvalidEventError` saying what to change."""
    try:
        return new_event(event_type, payload, key, **where)
    except (TypeError, ValueError) as exc:
        raise InvalidEventError(f"outbox event {event_type!r} refused: {exc}") from exc


def emit(event_type: str, payload: Any, *, key: str | None = None) -> str:
    """Emit an outbox event from the running node or `@task`; returns its event id.

    The event commits in the transaction that stores this task's writes (or the
    checkpoint that carries them), in every durability mode, and never before: a task
    that fails or is interrupted emits nothing, and a task whose writes committed does
    not run, so does not emit, again. A relay publishes it afterwards with the event id as
    the message id.

    Args:
        event_type: What happened, e.g. "order.shipped".
        payload: JSON-serializable data.
        key: Events of one key are published in order; the thread id when not given.

    Raises:
        OutboxUnavailableError: Called outside a node, or the graph's saver is not durable.
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
    )
    saver.park_event(event)
    return event.event_id
