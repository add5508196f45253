"""Retry policies and the decision taken on each journal row state; pure, no I/O.

`decide()` is the whole protocol of invariants I2 and I3 in one function: given the row
found under a key, the call's name and input hash, and the time, it says whether to
attempt, replay, wait, take over, reconcile or stop. The async runner and its generated
sync twin only carry out what it says.
"""

from __future__ import annotations

import enum
import random
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Literal

from langgraph_durable.errors import EffectInputMismatchError

__all__ = [
    "Action",
    "Decision",
    "JournalRow",
    "Reconciled",
    "RetryLater",
    "RetryPolicy",
    "decide",
    "retry_after_of",
]


class RetryLater(Exception):
    """Raise from an effect when the receiver says "not now" (for example HTTP 429).

    The run is parked: the effect raises `EffectDeferred` with the time to retry, and a
    later call after that time attempts again.
    """

    def __init__(self, retry_after: float, message: str = "") -> None:
        super().__init__(message or f"retry after {retry_after:g}s")
        self.retry_after = retry_after


def retry_after_of(exc: BaseException) -> float | None:
    """Seconds to wait, if the error carries a retry-after (ours or a client library's)."""
    value = getattr(exc, "retry_after", None)
    if isinstance(value, (int, float)) and value >= 0:
        return float(value)
    return None


@dataclass(frozen=True)
class RetryPolicy:
    """How an effect retries. Attempt counts live in the journal, so restarts keep them.

    Attributes:
        max_attempts: Attempts in all, the first included.
        initial_delay: Seconds before the second attempt.
        backoff: Factor applied to the delay after each attempt.
        max_delay: Upper bound of one delay.
        jitter: Fraction of the delay added or removed at random, so that many workers
            retrying at once spread out.
        retry_on: Errors worth another attempt (network, timeouts).
        unknown_outcome: What to do with an attempt that started and never recorded an
            outcome: "raise" (`EffectOutcomeUnknown`, the safe default) or "retry", which is
            right only when the receiver honours the idempotency key.
    """

    max_attempts: int = 3
    initial_delay: float = 0.5
    backoff: float = 2.0
    max_delay: float = 30.0
    jitter: float = 0.25
    retry_on: tuple[type[BaseException], ...] = (ConnectionError, TimeoutError)
    unknown_outcome: Literal["raise", "retry"] = "raise"

    def retryable(self, exc: BaseException) -> bool:
        return isinstance(exc, self.retry_on)

    def delay(self, attempt: int, rng: random.Random | None = None) -> float:
        """Seconds to wait after failed attempt number `attempt` (1-based)."""
        base = min(self.max_delay, self.initial_delay * self.backoff ** max(0, attempt - 1))
        spread = base * self.jitter
        return max(0.0, base + (rng or random).uniform(-spread, spread))


IDEMPOTENT_RECEIVER = RetryPolicy(unknown_outcome="retry")


@dataclass(frozen=True)
class Reconciled:
    """What a `reconcile` hook found at the receiver for a key."""

    found: bool
    result: Any = None

    @classmethod
    def completed(cls, result: Any = None) -> Reconciled:
        """The receiver did act; `result` is what the effect would have returned."""
        return cls(True, result)

    @classmethod
    def absent(cls) -> Reconciled:
        """The receiver never acted: a new attempt is safe."""
        return cls(False)


@dataclass(frozen=True)
class JournalRow:
    """The columns of a journal row that decisions depend on."""

    key: str
    effect_name: str
    input_hash: str
    status: str
    attempt: int
    lease_expires_at: datetime | None = None
    next_attempt_at: datetime | None = None
    result_type: str | None = None
    result: bytes | None = None
    error_type: str | None = None
    error_message: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


class Action(enum.Enum):
    REPLAY = "replay"  # completed: return the stored result
    RAISE_FAILED = "raise_failed"  # failed terminally: raise the stored error
    WAIT = "wait"  # another attempt holds a live lease, or a backoff is pending
    TAKE_OVER = "take_over"  # start the next attempt (conditional on the row not changing)
    RECONCILE = "reconcile"  # outcome unknown: ask the receiver through the hook
    RAISE_UNKNOWN = "raise_unknown"  # outcome unknown and nothing may resolve it
    RAISE_DEFERRED = "raise_deferred"  # rate limited until next_attempt_at


@dataclass(frozen=True)
class Decision:
    action: Action
    until: datetime | None = None


def decide(
    row: JournalRow,
    *,
    name: str,
    input_hash: str,
    now: datetime,
    policy: RetryPolicy,
    has_reconcile: bool,
) -> Decision:
    """What to do with an existing journal row for this call (invariants I2, I3)."""
    if row.effect_name != name:
        raise EffectInputMismatchError(
            f"Key {row.key!r} belongs to effect {row.effect_name!r}, not {name!r}; nothing "
            "was called. Give each effect its own keys."
        )
    if row.input_hash != input_hash:
        raise EffectInputMismatchError(
            f"Key {row.key!r} of effect {name!r} was first used with input hash "
            f"{row.input_hash} and now with {input_hash}; nothing was called. Use a new key "
            "for a new input, or pass the original input."
        )
    if row.status == "completed":
        return Decision(Action.REPLAY)
    if row.status == "failed":
        return Decision(Action.RAISE_FAILED)
    if row.status == "deferred":
        if row.next_attempt_at is not None and now < row.next_attempt_at:
            return Decision(Action.RAISE_DEFERRED, row.next_attempt_at)
        return Decision(Action.TAKE_OVER)
    if row.status == "retry_wait":
        if row.next_attempt_at is not None and now < row.next_attempt_at:
            return Decision(Action.WAIT, row.next_attempt_at)
        return Decision(Action.TAKE_OVER)
    if row.status == "running" and row.lease_expires_at is not None and now < row.lease_expires_at:
        return Decision(Action.WAIT, row.lease_expires_at)
    # A running row whose lease expired, or one already marked unknown.
    if has_reconcile:
        return Decision(Action.RECONCILE)
    if policy.unknown_outcome == "retry":
        return Decision(Action.TAKE_OVER)
    return Decision(Action.RAISE_UNKNOWN)


def lease_until(now: datetime, seconds: float) -> datetime:
    return now + timedelta(seconds=seconds)
