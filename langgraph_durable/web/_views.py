"""What the console's pages show, computed from rows: pure, tested without a server.

The handlers in `_app.py` read the database and call the library; everything that turns
what they read into something a person can read lives here.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from langgraph.checkpoint.serde.base import SerializerProtocol

from langgraph_durable._langgraph import ERROR
from langgraph_durable._redact import redact_passwords
from langgraph_durable.approvals import PendingApproval, UnreadableQuestion, shown_from_rows
from langgraph_durable.outbox import error_text
from langgraph_durable.runs import Run, RunStatus
from langgraph_durable.serde import unsealed

__all__ = [
    "STATUS_ORDER",
    "Question",
    "Step",
    "Task",
    "as_json",
    "by_status",
    "human_age",
    "node_of_task_path",
    "question_token",
    "questions_by_token",
    "redacted",
    "shown_error",
    "timeline",
]

# Runs that need a person first, finished ones last.
STATUS_ORDER = (
    RunStatus.BLOCKED,
    RunStatus.RUNNING,
    RunStatus.PENDING,
    RunStatus.DEFERRED,
    RunStatus.INTERRUPTED,
    RunStatus.ERROR,
    RunStatus.TIMEOUT,
    RunStatus.CANCELLED,
    RunStatus.SUCCESS,
)

MAX_SHOWN = 4000  # characters of one value on a page; the rest is cut with a note


def as_json(value: Any, *, limit: int = MAX_SHOWN) -> str:
    """A value as indented JSON for a page (anything else as its `str`), cut at `limit`."""
    for sort_keys in (True, False):  # keys of several types (1 and "two") cannot be sorted
        try:
            text = json.dumps(value, indent=2, sort_keys=sort_keys, default=str, ensure_ascii=False)
            break
        except (TypeError, ValueError):
            continue
    else:
        text = str(value)
    if len(text) > limit:
        text = text[:limit] + f"\n... ({len(text) - limit} more characters)"
    return text


def human_age(age: timedelta | None) -> str:
    """`3d 4h`, `15h 2m`, `4m 10s`, `12s`: the two largest units of an age."""
    if age is None:
        return "unknown"
    seconds = max(0, int(age.total_seconds()))
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, seconds = divmod(rest, 60)
    if days:
        return f"{days}d {hours}h"
    if hours:
        return f"{hours}h {minutes}m"
    if minutes:
        return f"{minutes}m {seconds}s"
    return f"{seconds}s"


Question = PendingApproval | UnreadableQuestion
"""A stored question as the console lists it: loaded to be shown, or why it cannot be."""


def question_token(
    row: Mapping[str, Any], interrupt_id: str, serde: SerializerProtocol | None = None
) -> str:
    """A fingerprint of one question as asked: a page answers only the question it showed.

    Made of the stored row (its type and bytes, decrypted when `serde` encrypts: a sibling
    question is written again, with a new nonce, when another is answered) with its
    thread, checkpoint and interrupt id, never of the value loaded from it: printing a
    value again depends on the process (a set's order follows its hash seed), and consoles
    behind a load balancer must agree. It changes when the thread moves on, and when an
    approval node asks again (a refused approver or a changed request: a new payload,
    under a new interrupt id).
    """
    kind, blob = row["type"], bytes(row["blob"] or b"")
    if serde is not None:
        # A row this process cannot open is listed as unreadable anyway.
        with contextlib.suppress(Exception):
            kind, blob = unsealed(serde, (kind, blob))
    head = json.dumps([row["thread_id"], row["checkpoint_id"], interrupt_id, kind])
    return hashlib.sha256(head.encode() + blob).hexdigest()[:32]


def questions_by_token(
    serde: SerializerProtocol, rows: Iterable[Mapping[str, Any]]
) -> dict[str, Question]:
    """What `pending_interrupts` rows ask, by question token, in their order: loaded to
    be shown (`shown_from_rows`), a row that cannot be loaded as an `UnreadableQuestion`."""
    return {
        question_token(row, getattr(question, "interrupt_id", ""), serde): question
        for row, question in shown_from_rows(serde, rows)
    }


def by_status(runs: Iterable[Run]) -> list[tuple[RunStatus, list[Run]]]:
    """Runs grouped by status, in `STATUS_ORDER`; empty groups left out."""
    groups: dict[RunStatus, list[Run]] = {}
    for run in runs:
        groups.setdefault(run.status, []).append(run)
    return [(status, groups[status]) for status in STATUS_ORDER if status in groups]


def node_of_task_path(task_path: str) -> str:
    """The node of a task from its stored path (`~__pregel_pull, find_order`)."""
    parts = [p.strip() for p in task_path.lstrip("~").split(",")]
    if len(parts) >= 2 and parts[0] == "__pregel_pull":
        return parts[1]
    if parts and parts[0] == "__pregel_push":
        return "(sent task)"
    return task_path or "(answer or update from outside)"


@dataclass
class Task:
    """What one task wrote after a checkpoint, and the effects its node journaled."""

    task_id: str
    node: str
    writes: list[tuple[str, str]] = field(default_factory=list)
    routes: list[str] = field(default_factory=list)
    interrupted: bool = False
    effects: list[Mapping[str, Any]] = field(default_factory=list)


@dataclass
class Step:
    """One root checkpoint and the tasks that ran from it."""

    checkpoint_id: str
    step: int | None
    source: str | None
    run_id: str | None
    created_at: Any
    tasks: list[Task] = field(default_factory=list)


def _load(serde: SerializerProtocol, type_: str, blob: bytes | None) -> Any:
    try:
        return serde.loads_typed((type_, blob or b""))
    except Exception as exc:  # one bad value must not hide the rest of the timeline
        return f"(cannot show this value: {type(exc).__name__})"


def timeline(
    serde: SerializerProtocol,
    checkpoints: Sequence[Mapping[str, Any]],
    writes: Iterable[Mapping[str, Any]],
    effects: Iterable[Mapping[str, Any]],
) -> tuple[list[Step], list[Mapping[str, Any]]]:
    """A thread's steps, oldest first, and the effects no step claims.

    Each checkpoint's tasks are what ran from it (their writes are stored against it). An
    effect belongs to the task of its node one step after the checkpoint: LangGraph runs
    the tasks of the checkpoint at step n as step n + 1.
    """
    steps: dict[str, Step] = {}
    for row in checkpoints:
        metadata = row["metadata"] or {}
        steps[row["checkpoint_id"]] = Step(
            checkpoint_id=row["checkpoint_id"],
            step=metadata.get("step"),
            source=metadata.get("source"),
            run_id=metadata.get("run_id"),
            created_at=row["created_at"],
        )
    tasks: dict[tuple[str, str], Task] = {}
    for row in writes:
        step = steps.get(row["checkpoint_id"])
        if step is None:
            continue
        key = (row["checkpoint_id"], row["task_id"])
        task = tasks.get(key)
        if task is None:
            task = tasks[key] = Task(
                task_id=row["task_id"], node=node_of_task_path(row["task_path"])
            )
            step.tasks.append(task)
        channel: str = row["channel"]
        if channel.startswith("branch:to:"):
            task.routes.append(channel.removeprefix("branch:to:"))
        elif channel == "__interrupt__":
            task.interrupted = True
            task.writes.append((channel, as_json(_interrupt_values(serde, row))))
        elif channel == ERROR:
            # The node's error as LangGraph stored it (its repr): error text, shown as
            # every other error text is, passwords and URL secrets hidden.
            error = _load(serde, row["type"], row["blob"])
            task.writes.append((channel, as_json(redacted(str(error)))))
        else:
            task.writes.append((channel, as_json(_load(serde, row["type"], row["blob"]))))
    by_place = {(s.step, t.node): t for s in steps.values() for t in s.tasks}
    unplaced: list[Mapping[str, Any]] = []
    for effect in effects:
        place = (None if effect["step"] is None else effect["step"] - 1, effect["node"])
        if place in by_place:
            by_place[place].effects.append(effect)
        else:
            unplaced.append(effect)
    return list(steps.values()), unplaced


def _interrupt_values(serde: SerializerProtocol, row: Mapping[str, Any]) -> Any:
    loaded = _load(serde, row["type"], row["blob"])
    if isinstance(loaded, (list, tuple)):
        return [getattr(item, "value", item) for item in loaded]
    return loaded


SHOWN_ERROR_MAX = 300
"""Characters of a graph's error a page shows: enough to name it, not a wall of text."""


class _StoredText(Exception):
    """Carries a stored error text through `error_text`, the one rule for URLs in errors."""


def redacted(text: str | None) -> str:
    """Error text as a page may show it (the `redact` filter of every template): every
    password, token and URL user part hidden (`_redact.redact_passwords`), then each URL
    cut to its scheme and host (`https://***@host/…`). An error a node raised, or an
    effect's receiver, may quote a DSN or a webhook URL; the registry and the journal
    store it as it was, and pages never show a password. Hidden before anything is cut:
    a URL cut before its `@` would no longer look as if it held one."""
    if not text:
        return ""
    shown = error_text(_StoredText(redact_passwords(text)))
    return shown.removeprefix(f"{_StoredText.__name__}: ")


def shown_error(error: BaseException) -> str:
    """`Type: message` of an error a graph raised, as a page may show it: `redacted`, cut
    to `SHOWN_ERROR_MAX` characters."""
    text = redacted(f"{type(error).__name__}: {error}")
    return text if len(text) <= SHOWN_ERROR_MAX else text[:SHOWN_ERROR_MAX] + "…"
