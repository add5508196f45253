"""Journal rows and results in both flavours: pure, shared by `_ajournal.py` and its twin."""

from __future__ import annotations

import json
import uuid
from typing import Any

from langgraph.checkpoint.serde.base import SerializerProtocol

from langgraph_durable._ids import storable_text
from langgraph_durable.checkpoint import ParkedEvent, new_event
from langgraph_durable.effects._keys import TaskContext
from langgraph_durable.effects._protocol import EffectStatus, JournalRow
from langgraph_durable.errors import EffectResultNotStoredError

__all__ = [
    "claim_params",
    "completion_event_of",
    "dump_result",
    "error_message_of",
    "error_text",
    "json_text",
    "load_result",
    "row_of",
]

_EVENT_NAMESPACE = uuid.UUID("0f3b8f8e-1d5c-4b7e-8f7a-6c2d9b1e4a33")


def completion_event_of(
    event_type: str, key: str, name: str, thread_id: str | None, result: Any
) -> ParkedEvent:
    """The outbox event announcing an effect's completion (`@effect(event=...)`).

    Its id here is derived from the key; the statement that stores the completion mixes in
    when the journal row was created (`effect_complete_events`), so the events of one row
    share an id, and an effect that acts again after its row was deleted (its thread
    deleted, its run rolled back) announces it again: under the first row's id the outbox
    dropped the event, though the receiver had acted. The result is in the payload when
    Postgres can store it as JSON; otherwise its type's name is. Never raises because of
    the result: the receiver has acted, and storing its result is all that is left.
    """
    event_id = str(uuid.uuid5(_EVENT_NAMESPACE, key))
    payload: dict[str, Any] = {"key": key, "effect": name, "result": result}
    try:
        return new_event(event_type, payload, thread_id or key, event_id=event_id)
    except Exception:
        # Not JSON, NaN, a NUL or a lone surrogate somewhere in it, or a container whose
        # own code fails when read: its type goes instead.
        payload = {"key": key, "effect": name, "result_type": type(result).__name__}
        return new_event(event_type, payload, thread_id or key, event_id=event_id)


MAX_ERROR_MESSAGE = 2000
"""Characters of an attempt's error message the journal keeps."""


def error_text(text: str) -> str:
    """An error's text as the journal stores it: NUL characters and lone surrogates
    escaped (`storable_text`), cut to `MAX_ERROR_MESSAGE`. Refused by Postgres, they
    failed the write that records how the attempt ended: the attempt stayed `running`
    until its lease ran out, and then read as unknown though its receiver had refused."""
    return storable_text(text)[:MAX_ERROR_MESSAGE]


def error_message_of(error: BaseException) -> str:
    """`str(error)` as the journal stores it (`error_text`). Never raises: an exception
    whose own `__str__` raises is still journaled, by what is known of it."""
    try:
        text = str(error)
    except Exception as failed:
        text = f"(its message could not be read: {type(failed).__name__})"
    return error_text(text)


def row_of(found: dict[str, Any]) -> JournalRow:
    """An `effect_get` row as the protocol sees it."""
    return JournalRow(
        key=found["key"],
        effect_name=found["effect_name"],
        input_hash=found["input_hash"],
        status=EffectStatus(found["status"]),
        attempt=found["attempt"],
        lease_owner=found["lease_owner"],
        lease_expires_at=found["lease_expires_at"],
        next_attempt_at=found["next_attempt_at"],
        result_type=found["result_type"],
        result=found["result"],
        error_type=found["error_type"],
        error_message=found["error_message"],
        db_now=found["db_now"],
        extra={
            k: found[k]
            for k in ("usage", "replays", "thread_id", "node", "step", "completion_event")
        },
    )


def claim_params(
    key: str,
    name: str,
    input_hash: str,
    owner: str,
    lease_seconds: float,
    where: TaskContext | None,
    completion_event: str | None = None,
    default_key: bool = False,
) -> dict[str, Any]:
    return {
        "completion_event": completion_event,
        "default_key": default_key,
        "key": key,
        "effect_name": name,
        "input_hash": input_hash,
        "owner": owner,
        "lease_seconds": lease_seconds,
        "thread_id": where.thread_id if where else None,
        "checkpoint_ns": where.namespace if where else None,
        "node": where.node if where else None,
        "step": where.step if where else None,
        "fence_token": where.fence_token if where else None,
    }


def dump_result(serde: SerializerProtocol, key: str, result: Any) -> tuple[str, bytes]:
    """Serialize a result for the journal, or raise `EffectResultNotStoredError`."""
    try:
        return serde.dumps_typed(result)
    except Exception as exc:
        raise EffectResultNotStoredError(
            f"The result of the effect under key {key!r} (a {type(result).__name__}) "
            f"cannot be serialized ({exc}), so it was not journaled. Return plain data "
            "(str, numbers, dicts, lists, pydantic models), or convert the result inside "
            "the effect.",
            key=key,
        ) from exc


def load_result(serde: SerializerProtocol, row: JournalRow) -> Any:
    assert row.result_type is not None
    assert row.result is not None
    return serde.loads_typed((row.result_type, row.result))


def json_text(value: dict[str, Any]) -> str:
    return json.dumps(value, default=str)
