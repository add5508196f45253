"""A thread's history as an operator reads it: pure, from checkpoints the saver loaded.

LangGraph records which node has seen which channel version (`versions_seen`) in every
checkpoint. The nodes that ran between two checkpoints are the ones whose entry changed,
and what they wrote is every state channel whose version changed. Channels LangGraph keeps
for itself (`__start__`, `branch:to:node`, ...) are left out: they are routing, not state.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import math
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import date, datetime
from decimal import Decimal
from typing import Any, TypeVar

from langgraph.checkpoint.base import CheckpointTuple

from langgraph_durable._db import source_of
from langgraph_durable.errors import ConfigurationError, InvalidInputError

__all__ = [
    "Step",
    "ThreadHistory",
    "ThreadSummary",
    "checked_limit",
    "checked_saver",
    "diff_values",
    "latest_steps",
    "plain",
    "state_channels",
    "steps_of",
]

S = TypeVar("S")

INTERRUPT_CHANNEL = "__interrupt__"


@dataclass(frozen=True)
class ThreadSummary:
    """One thread: its latest checkpoint and how many it has."""

    thread_id: str
    checkpoints: int
    latest_checkpoint_id: str
    updated_at: str | None
    step: int | None
    source: str | None


@dataclass(frozen=True)
class Step:
    """One checkpoint of a thread and what led to it."""

    checkpoint_id: str
    parent_checkpoint_id: str | None
    step: int | None
    source: str | None
    created_at: str | None
    run_id: str | None
    nodes: tuple[str, ...]
    """The nodes that ran into this checkpoint (the input step: `__start__`)."""
    wrote: dict[str, Any]
    """State channels whose value changed here, with their new values."""
    waiting: list[Any] = field(default_factory=list)
    """What the thread was asked at an `interrupt()` here, if it stopped to ask."""


@dataclass(frozen=True)
class ThreadHistory:
    """What happened on a thread: its steps, the effects they ran, the tokens paid."""

    thread_id: str
    steps: list[Step]
    effects: list[dict[str, Any]]
    tokens: dict[str, int]


def checked_saver(saver: Any, kind: type[S]) -> S:
    """`saver` if it is a langgraph-durable saver of `kind` with its connections."""
    if not isinstance(saver, kind) or source_of(saver) is None:
        raise ConfigurationError(
            f"Thread histories are read from langgraph-durable's tables; got a "
            f"{type(saver).__name__}. Pass a {kind.__name__} on that database."
        )
    return saver


def checked_limit(limit: object) -> int:
    if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
        raise InvalidInputError(f"limit={limit!r}: use a whole number >= 1.")
    return limit


def state_channels(values: Mapping[str, Any]) -> dict[str, Any]:
    """The channels a graph's state is made of (LangGraph's routing channels left out)."""
    return {k: v for k, v in values.items() if not k.startswith("__") and ":" not in k}


def _changed(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[str]:
    return [k for k, v in after.items() if before.get(k) != v]


def steps_of(tuples: Iterable[CheckpointTuple]) -> list[Step]:
    """The steps of a thread's root checkpoints, oldest first (give them in any order)."""
    ordered = sorted(tuples, key=lambda t: t.checkpoint["id"])
    steps: list[Step] = []
    seen_before: Mapping[str, Any] = {}
    versions_before: Mapping[str, Any] = {}
    for found in ordered:
        checkpoint = found.checkpoint
        seen = checkpoint.get("versions_seen") or {}
        versions = checkpoint.get("channel_versions") or {}
        values = checkpoint.get("channel_values") or {}
        nodes = tuple(sorted(n for n in seen if n != "__input__" and seen_before.get(n) != seen[n]))
        wrote = {
            channel: plain(values.get(channel))
            for channel in state_channels({c: None for c in _changed(versions_before, versions)})
        }
        metadata = found.metadata or {}
        parent = (
            found.parent_config["configurable"]["checkpoint_id"] if found.parent_config else None
        )
        steps.append(
            Step(
                checkpoint_id=checkpoint["id"],
                parent_checkpoint_id=parent,
                step=metadata.get("step"),
                source=metadata.get("source"),
                created_at=checkpoint.get("ts"),
                run_id=metadata.get("run_id"),
                nodes=nodes,
                wrote=wrote,
                waiting=_asked(found),
            )
        )
        seen_before, versions_before = seen, versions
    return steps


def latest_steps(tuples: Iterable[CheckpointTuple], limit: int) -> list[Step]:
    """The newest `limit` steps, oldest first, from a thread's newest `limit + 1` root
    checkpoints: when there is one more than `limit`, the oldest is read only as what the
    first step shown is compared with (otherwise every node and channel seemed new there)."""
    steps = steps_of(tuples)
    return steps[len(steps) - limit :] if len(steps) > limit else steps


def _asked(found: CheckpointTuple) -> list[Any]:
    """What the interrupts pending at this checkpoint ask (their values)."""
    asked: list[Any] = []
    for _, channel, value in found.pending_writes or []:
        if channel == INTERRUPT_CHANNEL:
            items = value if isinstance(value, (list, tuple)) else [value]
            asked.extend(plain(getattr(item, "value", item)) for item in items)
    return asked


def diff_values(before: Mapping[str, Any], after: Mapping[str, Any]) -> dict[str, Any]:
    """How a thread's state changed between two checkpoints, channel by channel."""
    old, new = state_channels(before), state_channels(after)
    return {
        "added": {k: plain(new[k]) for k in sorted(new.keys() - old.keys())},
        "removed": {k: plain(old[k]) for k in sorted(old.keys() - new.keys())},
        "changed": {
            k: {"from": plain(old[k]), "to": plain(new[k])}
            for k in sorted(old.keys() & new.keys())
            if not _same(plain(old[k]), plain(new[k]))
        },
    }


def _same(before: Any, after: Any) -> bool:
    """Equal as plain values, where a NaN equals a NaN (Python's `==` says a NaN that
    stayed put changed)."""
    if isinstance(before, float) and isinstance(after, float):
        return before == after or (math.isnan(before) and math.isnan(after))
    if isinstance(before, dict) and isinstance(after, dict):
        return before.keys() == after.keys() and all(_same(before[k], after[k]) for k in before)
    if isinstance(before, list) and isinstance(after, list):
        return len(before) == len(after) and all(map(_same, before, after))
    return bool(before == after)


def plain(value: Any) -> Any:
    """A value as JSON can show it: messages and models as their fields, times as ISO 8601,
    anything else unknown as its repr."""
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    if isinstance(value, (uuid.UUID, Decimal)):
        return str(value)
    if isinstance(value, enum.Enum):
        return plain(value.value)
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (set, frozenset)):
        # In an order of their own: a set's iteration order depends on how it was built
        # (and on the hash seed), so the same set read twice looked changed.
        return sorted((plain(v) for v in value), key=lambda v: json.dumps(v, default=str))
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, bytes):
        return f"<{len(value)} bytes>"
    message_type = getattr(value, "type", None)
    if isinstance(message_type, str) and hasattr(value, "content"):  # a langchain message
        return {"type": message_type, "content": plain(value.content)}
    model_dump = getattr(value, "model_dump", None)
    if callable(model_dump):  # a pydantic model
        return plain(model_dump())
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return plain(dataclasses.asdict(value))
    return repr(value)
