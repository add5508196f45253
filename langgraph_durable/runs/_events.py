"""Run and approval events for the outbox: which happened, and what each one says. Pure.

A registry made with `events=` stores these in the outbox in the same transaction as the
change they announce (a run's finish, a resume, the sweep), so a relay publishes exactly
the changes that committed: a manager is told what to approve when the run stops to ask,
an operator when a run failed or is stuck. Each type is switched on by name.

Payloads carry ids, statuses and the question asked, never error text (it may quote
secrets; read it from the registry). Event ids are derived from the run, its fencing
token and the type, so a retried finish cannot store one twice.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any

from langgraph_durable._ids import json_text
from langgraph_durable.approvals import PendingApproval
from langgraph_durable.errors import ConfigurationError
from langgraph_durable.runs._model import Outcome, Run, RunStatus

__all__ = [
    "RUN_EVENTS",
    "Event",
    "answered_event",
    "checked_events",
    "event_id",
    "finish_events",
    "json_request",
    "sweep_events",
]

RUN_EVENTS = (
    "run.completed",
    "run.failed",
    "run.interrupted",
    "run.blocked",
    "run.stuck",
    "run.timed_out",
    "approval.requested",
    "approval.answered",
    "effect.unknown",
)
"""Every event type a registry can emit; pass the ones you want as `events=`."""

_NAMESPACE = uuid.UUID("5b0c5e7e-2f5a-4c63-9a57-9e1d0c7b6a10")

Event = tuple[str, dict[str, Any], str]
"""(type, payload, event id); the key is always the thread, so a thread's events keep
their order."""


def checked_events(events: Collection[str] | bool) -> frozenset[str]:
    """The event types a registry emits: `True` for all, or the names given."""
    if events is True:
        return frozenset(RUN_EVENTS)
    if events is False or not events:
        return frozenset()
    if isinstance(events, str):
        events = [events]
    unknown = sorted(set(events) - set(RUN_EVENTS))
    if unknown:
        raise ConfigurationError(
            f"Unknown run event type(s) {', '.join(unknown)}; choose from "
            f"{', '.join(RUN_EVENTS)} (or events=True for all)."
        )
    return frozenset(events)


def event_id(*parts: object) -> str:
    return str(uuid.uuid5(_NAMESPACE, "\x1f".join(str(p) for p in parts)))


def _base(run: Run) -> dict[str, Any]:
    return {
        "run_id": run.run_id,
        "thread_id": run.thread_id,
        "graph": run.graph_name,
        "version": run.graph_version,
        "attempt": run.attempt,
    }


def finish_events(
    run: Run,
    outcome: Outcome,
    approvals: Sequence[PendingApproval],
    enabled: frozenset[str],
) -> list[Event]:
    """What a worker's finish of `run` announces (its pending approvals when it stopped to
    ask), among the `enabled` types."""
    status = outcome.status
    found: list[tuple[str, dict[str, Any]]] = []
    base = {**_base(run), "status": None if status is None else status.value}
    if status is RunStatus.SUCCESS:
        found.append(("run.completed", base))
    elif status is RunStatus.ERROR:
        found.append(("run.failed", {**base, "error_type": outcome.error_type}))
    elif status is RunStatus.INTERRUPTED:
        found.append(("run.interrupted", base))
        for asked in approvals:
            if asked.is_approval:
                request = asked.value.get("request") if isinstance(asked.value, Mapping) else None
                found.append(
                    (
                        "approval.requested",
                        {**base, "interrupt_id": asked.interrupt_id, **json_request(request)},
                    )
                )
    elif status is RunStatus.BLOCKED:
        found.append(("run.blocked", {**base, "reason": "effect"}))
        key = getattr(outcome.error, "key", None)
        if key is not None:
            found.append(("effect.unknown", {**base, "effect_key": key}))
    token = run.fencing_token
    return [
        (kind, payload, event_id(run.run_id, token, kind, i))
        for i, (kind, payload) in enumerate(found)
        if kind in enabled
    ]


def json_request(request: Any) -> dict[str, Any]:
    """The question of an approval as its event carries it: `{"request": ...}`.

    The question is graph state, which need not be JSON (a `Decimal` amount, a date); the
    outbox stores JSON only, and refusing the event would refuse the finish that it rides
    with, leaving the run running. So values JSON lacks are written as their text, as
    `json.dumps(default=str)` does; when even that cannot be stored (NaN, a NUL, a lone
    surrogate, a container whose own code fails) only the question's type goes, as
    `request_type`, like an effect's completion event does with its result.
    """
    try:
        plain = json.loads(json.dumps(request, default=str, allow_nan=False))
        json_text(plain, "an approval's question")  # refuses a NUL or a lone surrogate
        return {"request": plain}
    except Exception:
        return {"request": None, "request_type": type(request).__name__}


def answered_event(run: Run, answer: Any, enabled: frozenset[str]) -> list[Event]:
    """What a resume of `run` announces: the answer to its approval, if it is one."""
    if "approval.answered" not in enabled:
        return []
    resume = getattr(answer, "resume", answer)
    decisions = [resume] if not isinstance(resume, Mapping) or "approved" in resume else []
    if isinstance(resume, Mapping) and "approved" not in resume:
        decisions = [v for v in resume.values() if isinstance(v, Mapping)]
    decision = next((d for d in decisions if isinstance(d, Mapping) and "approved" in d), None)
    if decision is None:
        return []
    payload = {
        **_base(run),
        "approved": bool(decision.get("approved")),
        "approver": decision.get("approver"),
    }
    return [("approval.answered", payload, event_id(run.run_id, "answered", run.updated_at))]


def sweep_events(
    changed: Mapping[str, Iterable[Mapping[str, Any]]], enabled: frozenset[str]
) -> list[Event]:
    """What a sweep announces: runs timed out, ended because their worker died in the last
    allowed attempt, flagged stuck, blocked for want of a worker of their version."""
    found: list[Event] = []
    kinds = {
        "timed_out": ("run.timed_out", "timeout"),
        "crash_loops": ("run.failed", "error"),
        "stuck": ("run.stuck", None),
        "blocked": ("run.blocked", "blocked"),
    }
    for what, rows in changed.items():
        kind, status = kinds[what]
        if kind not in enabled:
            continue
        for row in rows:
            payload = {
                "run_id": row["run_id"],
                "thread_id": row.get("thread_id"),
                "graph": row.get("graph_name"),
                "status": status or row.get("status"),
            }
            if what == "crash_loops":
                payload["error_type"] = row.get("error_type") or "WorkerLost"
            if what == "blocked":
                payload["reason"] = "version"
            stamp = row.get("stuck_since") or row.get("updated_at") or ""
            found.append((kind, payload, event_id(row["run_id"], kind, stamp)))
    return found
