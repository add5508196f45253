"""An effect journal in memory, with a clock the caller can move: for fast tests.

`MemoryEffectJournal` is an `EffectJournal` whose statements run on dicts instead of
Postgres: it overrides the methods that send one, and inherits the rest (resolving by
hand, results in and out). It keeps the rules of the `effect_*` statements of
`queries.sql`: every change is conditional on the attempt and status the caller saw,
times come from one clock, results go through the serializer.
`tests/integration/test_journal_parity.py` runs the same scenarios against both journals,
so the two cannot drift apart unnoticed. With a
`ManualClock`, the runner's waits move the clock instead of sleeping, so backoffs,
leases and deferrals are tested in microseconds.

    journal = MemoryEffectJournal(clock=ManualClock())

    @effect(key="refund:8890", journal=journal)
    def refund(amount: int) -> str: ...
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta, timezone
from typing import Any

from langgraph.checkpoint.serde.base import SerializerProtocol

from langgraph_durable._db import process_owner
from langgraph_durable.checkpoint import ParkedEvent
from langgraph_durable.effects._journal import EffectJournal
from langgraph_durable.effects._keys import TaskContext
from langgraph_durable.effects._protocol import (
    OPEN_STATUSES,
    RESOLVABLE_STATUSES,
    EffectStatus,
    JournalRow,
)
from langgraph_durable.effects._rows import error_message_of
from langgraph_durable.errors import ConfigurationError
from langgraph_durable.serde import make_safe

__all__ = ["ManualClock", "MemoryEffectJournal"]

_TOKENS = ("input_tokens", "output_tokens", "total_tokens")


class ManualClock:
    """A clock that stands still until `advance()` (or a journal wait) moves it."""

    def __init__(self, start: datetime | None = None) -> None:
        self.now = start or datetime(2026, 1, 1, tzinfo=timezone.utc)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


@dataclass
class _Row:
    key: str
    effect_name: str
    input_hash: str
    status: EffectStatus
    attempt: int
    lease_owner: str | None
    lease_expires_at: datetime | None
    thread_id: str | None
    node: str | None
    step: int | None
    next_attempt_at: datetime | None = None
    result_type: str | None = None
    result: bytes | None = None
    error_type: str | None = None
    error_message: str | None = None
    resolved_by: str | None = None
    usage: dict[str, Any] | None = None
    replays: int = 0
    extra: dict[str, Any] = field(default_factory=dict)


class MemoryEffectJournal(EffectJournal):
    """A sync effect journal in this process's memory (see the module docstring).

    Args:
        serde: How results are stored; LangGraph's JSON-plus serializer by default.
        clock: The time every decision uses; a `ManualClock` makes waits instant.
        owner: Who this journal's attempts belong to (`host:pid:start`); this process by
            default.
    """

    def __init__(
        self,
        *,
        serde: SerializerProtocol | None = None,
        clock: Callable[[], datetime] | None = None,
        owner: str | None = None,
    ) -> None:
        # No connection source: every method that would use one is overridden here.
        self.serde = make_safe(serde)
        self.owner = owner or process_owner()
        self.clock = clock or (lambda: datetime.now(timezone.utc))
        self._rows: dict[str, _Row] = {}
        self._lock = threading.Lock()

    def as_worker(self, owner: str) -> MemoryEffectJournal:
        """The same rows and clock, seen by another worker (another owner)."""
        other = MemoryEffectJournal(serde=self.serde, clock=self.clock, owner=owner)
        other._rows, other._lock = self._rows, self._lock
        return other

    # -- what the runner calls --------------------------------------------------------------

    def claim(
        self,
        key: str,
        name: str,
        input_hash: str,
        lease_seconds: float,
        where: TaskContext | None,
        call_token: str = "",
        completion_event: str | None = None,
        default_key: bool = False,
    ) -> int | None:
        with self._lock:
            if key in self._rows:
                return None
            self._rows[key] = _Row(
                key=key,
                effect_name=name,
                input_hash=input_hash,
                status=EffectStatus.RUNNING,
                attempt=1,
                lease_owner=self.owner_of(call_token),
                lease_expires_at=self.clock() + timedelta(seconds=lease_seconds),
                thread_id=where.thread_id if where else None,
                node=where.node if where else None,
                step=where.step if where else None,
            )
            return 1

    def lease_held(self, where: TaskContext) -> bool:
        """No thread leases in memory: every lease is held."""
        return True

    def get(self, key: str) -> JournalRow | None:
        with self._lock:
            row = self._rows.get(key)
            if row is None:
                return None
            return JournalRow(
                key=row.key,
                effect_name=row.effect_name,
                input_hash=row.input_hash,
                status=row.status,
                attempt=row.attempt,
                lease_owner=row.lease_owner,
                lease_expires_at=row.lease_expires_at,
                next_attempt_at=row.next_attempt_at,
                result_type=row.result_type,
                result=row.result,
                error_type=row.error_type,
                error_message=row.error_message,
                db_now=self.clock(),
                extra={
                    "usage": row.usage,
                    "replays": row.replays,
                    "thread_id": row.thread_id,
                    "node": row.node,
                    "step": row.step,
                },
            )

    def _change(
        self, key: str, attempt: int | None, statuses: Sequence[EffectStatus], **changes: Any
    ) -> _Row | None:
        """Apply `changes` if the row is still as the caller saw it (attempt and status)."""
        with self._lock:
            row = self._rows.get(key)
            if row is None or row.status not in statuses:
                return None
            if attempt is not None and row.attempt != attempt:
                return None
            for name, value in changes.items():
                setattr(row, name, value)
            return replace(row)

    def take_over(
        self,
        key: str,
        seen_attempt: int,
        seen_status: EffectStatus,
        lease_seconds: float,
        call_token: str = "",
        where: TaskContext | None = None,
    ) -> int | None:
        with self._lock:
            row = self._rows.get(key)
            if row is None or row.attempt != seen_attempt or row.status is not seen_status:
                return None
            row.attempt += 1
            row.status = EffectStatus.RUNNING
            row.lease_owner = self.owner_of(call_token)
            row.lease_expires_at = self.clock() + timedelta(seconds=lease_seconds)
            row.next_attempt_at = row.error_type = row.error_message = None
            return row.attempt

    def complete(
        self,
        key: str,
        attempt: int,
        result: Any,
        *,
        usage: dict[str, Any] | None = None,
        seen_statuses: Sequence[EffectStatus] = (EffectStatus.RUNNING,),
        resolved_by: str | None = None,
        events: Sequence[ParkedEvent] = (),
    ) -> bool:
        # No outbox in memory: completion events are refused rather than lost.
        if events:
            raise ConfigurationError(
                "@effect(event=...) needs the Postgres journal, whose outbox stores the "
                "event with the completion; drop event= for the in-memory journal."
            )
        type_, blob = self.dump_result(key, result)
        with self._lock:
            row = self._rows.get(key)
            keep = row.resolved_by if row is not None else None
        return (
            self._change(
                key,
                attempt,
                seen_statuses,
                status=EffectStatus.COMPLETED,
                result_type=type_,
                result=blob,
                usage=usage,
                resolved_by=resolved_by or keep,
                lease_owner=None,
                lease_expires_at=None,
                error_type=None,
                error_message=None,
            )
            is not None
        )

    def fail(
        self,
        key: str,
        attempt: int,
        error_type: str,
        error_message: str,
        *,
        seen_statuses: Sequence[EffectStatus] = (EffectStatus.RUNNING,),
        resolved_by: str | None = None,
    ) -> bool:
        changed = self._change(
            key,
            attempt,
            seen_statuses,
            status=EffectStatus.FAILED,
            error_type=error_type,
            error_message=error_message,
            resolved_by=resolved_by,
            lease_owner=None,
            lease_expires_at=None,
        )
        return changed is not None

    def wait_retry(
        self,
        key: str,
        attempt: int,
        *,
        status: EffectStatus,
        delay_seconds: float,
        error: BaseException,
    ) -> Any:
        changed = self._change(
            key,
            attempt,
            (EffectStatus.RUNNING,),
            status=status,
            next_attempt_at=self.clock() + timedelta(seconds=delay_seconds),
            error_type=type(error).__name__,
            error_message=error_message_of(error),
            lease_owner=None,
            lease_expires_at=None,
        )
        return None if changed is None else changed.next_attempt_at

    def extend_lease(self, key: str, attempt: int, lease_seconds: float) -> bool:
        return None is not self._change(
            key,
            attempt,
            (EffectStatus.RUNNING,),
            lease_expires_at=self.clock() + timedelta(seconds=lease_seconds),
        )

    def mark_unknown(
        self,
        key: str,
        attempt: int,
        *,
        error_type: str | None = None,
        error_message: str | None = None,
        delay_seconds: float | None = None,
    ) -> bool:
        with self._lock:
            row = self._rows.get(key)
            if row is None or row.attempt != attempt or row.status is not EffectStatus.RUNNING:
                return False
            row.status = EffectStatus.UNKNOWN
            row.error_type = error_type or row.error_type
            row.error_message = (error_message[:2000] if error_message else None) or (
                row.error_message
            )
            row.next_attempt_at = (
                None if delay_seconds is None else self.clock() + timedelta(seconds=delay_seconds)
            )
            row.lease_owner = row.lease_expires_at = None
            return True

    def release(self, key: str, attempt: int, *, owner: str | None = None) -> None:
        with self._lock:
            row = self._rows.get(key)
            if row is None or row.status is not EffectStatus.RUNNING or row.attempt != attempt:
                return
            if owner is not None and row.lease_owner != owner:
                return
            row.status = EffectStatus.RETRY_WAIT
            row.next_attempt_at = self.clock()
            row.lease_owner = row.lease_expires_at = None

    def replayed(self, key: str) -> None:
        with self._lock:
            if key in self._rows:
                self._rows[key].replays += 1

    def now(self) -> datetime:
        """The journal's one clock, as the database's is for `EffectJournal`."""
        return self.clock()

    def sleep(self, seconds: float) -> None:
        """Wait: moves a `ManualClock` at once, sleeps for real otherwise."""
        if isinstance(self.clock, ManualClock):
            self.clock.advance(seconds)
        else:
            time.sleep(seconds)

    # -- what operators call ----------------------------------------------------------------

    def allow_retry(self, key: str, attempt: int, *, resolved_by: str) -> bool:
        changed = self._change(
            key,
            attempt,
            RESOLVABLE_STATUSES,
            status=EffectStatus.RETRY_WAIT,
            next_attempt_at=self.clock(),
            resolved_by=resolved_by,
            lease_owner=None,
            lease_expires_at=None,
        )
        return changed is not None

    def _run(self, doing: str, operation: Any, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(
            f"MemoryEffectJournal keeps no database; {doing} is not available in memory."
        )

    def token_ledger(self, thread_id: str) -> dict[str, int]:
        """Tokens of completed calls with usage, and tokens saved by their replays."""
        with self._lock:
            rows = [
                r
                for r in self._rows.values()
                if r.thread_id == thread_id and r.usage and r.status is EffectStatus.COMPLETED
            ]
        total = {k: sum(int(r.usage.get(k, 0)) for r in rows if r.usage) for k in _TOKENS}
        saved = {
            f"saved_{k}": sum(int(r.usage.get(k, 0)) * r.replays for r in rows if r.usage)
            for k in _TOKENS
        }
        return {**total, **saved, "calls": len(rows), "replays": sum(r.replays for r in rows)}

    def open_effects(self, thread_id: str | None = None, limit: int = 100) -> list[dict[str, Any]]:
        with self._lock:
            rows = [
                r
                for r in self._rows.values()
                if r.status in OPEN_STATUSES and (thread_id is None or r.thread_id == thread_id)
            ]
        return [
            {"key": r.key, "status": r.status.value, "attempt": r.attempt, "thread_id": r.thread_id}
            for r in rows[:limit]
        ]
