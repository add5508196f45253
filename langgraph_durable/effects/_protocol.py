"""The effect protocol as pure functions: journal statuses and every decision; no I/O.

Invariants I2 and I3 live here. The runners (`_arunner.py` and its generated twin) read a
journal row, ask `decide()` what to do, do it, and after an attempt ask `on_failure()` how
to journal an error; they never decide anything themselves. So every transition is tested
without a database (`tests/unit/test_effect_protocol.py`), and the in-memory journal
(`_memory.py`) follows the same rules as Postgres.

The statuses of a journal row, and the moves between them:

    (no row) --claim--> running --complete--> completed            (replayed forever)
                           |  \\--fail------> failed               (raised again forever)
                           |  \\--not sent--> retry_wait --due--> running (take over)
                           |  \\--rate limit-> deferred --due---> running (take over)
                           |  \\--interrupt--> retry_wait (released, next call attempts)
                           \\--open outcome, or lease lost--> unknown
    unknown --reconcile found--> completed
    unknown --reconcile absent, or retry="idempotent"--> running (take over)
    unknown --resolve by hand--> completed | failed | retry_wait
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from langgraph_durable.effects._policy import RetryPolicy, retry_after_of
from langgraph_durable.errors import EffectError, EffectInputMismatchError

__all__ = [
    "NOT_GIVEN",
    "OPEN_STATUSES",
    "OUTCOME_OPEN_STATUSES",
    "RESOLVABLE_STATUSES",
    "RESOLVED_AS_FAILED",
    "RESULT_NOT_STORED",
    "Action",
    "Decision",
    "EffectStatus",
    "Failure",
    "FailureStep",
    "JournalRow",
    "Resolution",
    "after_absent",
    "check_resolved",
    "choose_resolution",
    "decide",
    "on_failure",
    "pause_before_looking_again",
]


class EffectStatus(str, enum.Enum):
    """The status column of `langgraph_durable_effects` (its CHECK constraint lists these)."""

    RUNNING = "running"
    """An attempt holds the lease."""
    COMPLETED = "completed"
    """The result is stored; replays return it."""
    FAILED = "failed"
    """A terminal error is stored; replays raise it."""
    RETRY_WAIT = "retry_wait"
    """Nothing happened at the receiver; the next attempt may start at `next_attempt_at`."""
    DEFERRED = "deferred"
    """Rate limited: the run parks until `next_attempt_at`."""
    UNKNOWN = "unknown"
    """An attempt may or may not have acted; it needs reconciling or a decision."""


OPEN_STATUSES = (
    EffectStatus.RUNNING,
    EffectStatus.UNKNOWN,
    EffectStatus.DEFERRED,
    EffectStatus.RETRY_WAIT,
)
"""Rows an operator may have to look at (`effects_open`, the partial index)."""

OUTCOME_OPEN_STATUSES = (EffectStatus.UNKNOWN, EffectStatus.RUNNING)
"""Rows whose outcome a reconcile hook may settle (a running one once its lease is lost)."""

RESOLVABLE_STATUSES = (EffectStatus.UNKNOWN, EffectStatus.RUNNING, EffectStatus.FAILED)
"""Rows `resolve` may settle by hand: unknown ones, running ones whose lease is lost, and
failed ones (to let them try again, or to record that they did act after all)."""

RESULT_NOT_STORED = "ResultNotStored"
"""`error_type` of an unknown row whose attempt acted but whose result could not be
serialized: no automatic retry may call the receiver again; only reconcile or a person."""


@dataclass(frozen=True)
class JournalRow:
    """The columns of a journal row that decisions depend on."""

    key: str
    effect_name: str
    input_hash: str
    status: EffectStatus
    attempt: int
    lease_owner: str | None = None
    lease_expires_at: datetime | None = None
    next_attempt_at: datetime | None = None
    result_type: str | None = None
    result: bytes | None = None
    error_type: str | None = None
    error_message: str | None = None
    db_now: datetime | None = None
    """The database clock when the row was read: every decision uses this clock."""
    extra: dict[str, Any] = field(default_factory=dict)


class Action(enum.Enum):
    """What a caller does with the row found under its key."""

    REPLAY = "replay"  # completed: return the stored result
    RAISE_FAILED = "raise_failed"  # failed terminally: raise the stored error
    WAIT = "wait"  # a live lease, a backoff or a reconcile delay is pending: look again
    TAKE_OVER = "take_over"  # start the next attempt (conditional on the row not changing)
    RECONCILE = "reconcile"  # outcome unknown: ask the receiver through the hook
    RAISE_UNKNOWN = "raise_unknown"  # outcome unknown and nothing may resolve it
    RAISE_DEFERRED = "raise_deferred"  # rate limited until next_attempt_at
    RAISE_IN_PROGRESS = "raise_in_progress"  # another worker's attempt outlasted wait_timeout
    FAIL = "fail"  # journal a terminal failure (reconciled absent, no attempts left)
    ATTEMPT = "attempt"  # the running attempt is this call's own: its claim's reply was lost


@dataclass(frozen=True)
class Decision:
    action: Action
    until: datetime | None = None
    """For WAIT: look again then. For RAISE_DEFERRED: when the call may run."""
    reason: str = ""
    """For RAISE_UNKNOWN and FAIL: why nothing may resolve the row automatically."""


def _check_identity(row: JournalRow, name: str, input_hash: str) -> None:
    """I2: a key names one operation; another effect or input under it is an error."""
    if row.effect_name != name:
        raise EffectInputMismatchError(
            f"Key {row.key!r} belongs to effect {row.effect_name!r}, not {name!r}; nothing "
            "was called. Give each effect its own keys (a renamed effect needs name= with "
            "its old name until its runs have finished).",
            key=row.key,
        )
    if row.input_hash != input_hash:
        raise EffectInputMismatchError(
            f"Key {row.key!r} of effect {name!r} was first used with input hash "
            f"{row.input_hash} and now with {input_hash}; nothing was called. Use a new key "
            "for a new input, or pass the original input.",
            key=row.key,
        )


def decide(
    row: JournalRow,
    *,
    name: str,
    input_hash: str,
    policy: RetryPolicy,
    has_reconcile: bool,
    now: datetime,
    owner_dead: bool = False,
    waited: timedelta = timedelta(0),
    wait_limit: timedelta = timedelta(seconds=30),
    mine: bool = False,
) -> Decision:
    """What to do with the row found under this call's key (invariants I2, I3).

    Args:
        row: The journal row.
        name: The effect name of this call.
        input_hash: The input hash of this call.
        policy: The effect's retry policy.
        has_reconcile: Whether the effect has a reconcile hook.
        now: The database clock.
        owner_dead: The process holding a running row's lease is known to be gone (same
            host, no longer running): its lease counts as expired.
        waited: How long this call has already waited for another worker's attempt.
        wait_limit: How long it may wait (`wait_timeout`).
        mine: The row's lease names this very call (its claim committed, the reply was
            lost on the way back).
    """
    _check_identity(row, name, input_hash)
    status = row.status
    if status is EffectStatus.COMPLETED:
        return Decision(Action.REPLAY)
    if status is EffectStatus.FAILED:
        return Decision(Action.RAISE_FAILED)
    if status is EffectStatus.DEFERRED:
        if row.next_attempt_at is not None and now < row.next_attempt_at:
            return Decision(Action.RAISE_DEFERRED, row.next_attempt_at)
        return Decision(Action.TAKE_OVER)
    if status is EffectStatus.RETRY_WAIT:
        if row.next_attempt_at is not None and now < row.next_attempt_at:
            return Decision(Action.WAIT, row.next_attempt_at)
        return Decision(Action.TAKE_OVER)
    if status is EffectStatus.RUNNING and mine:
        return Decision(Action.ATTEMPT)
    lease_live = row.lease_expires_at is not None and now < row.lease_expires_at
    if status is EffectStatus.RUNNING and lease_live and not owner_dead:
        if waited >= wait_limit:
            return Decision(Action.RAISE_IN_PROGRESS)
        assert row.lease_expires_at is not None
        return Decision(Action.WAIT, min(row.lease_expires_at, now + wait_limit - waited))
    # The outcome is open: an unknown row, or a running one whose lease is lost.
    if row.error_type == RESULT_NOT_STORED:
        may_retry, reason = False, "its result could not be stored"
    elif policy.unknown_outcome != "retry":
        may_retry, reason = False, "the receiver may not honour the key"
    elif row.attempt >= policy.max_attempts:
        may_retry, reason = False, f"all {policy.max_attempts} attempts were used"
    else:
        may_retry, reason = True, ""
    if not has_reconcile and not may_retry:
        return Decision(Action.RAISE_UNKNOWN, reason=reason)
    waiting = row.next_attempt_at is not None and now < row.next_attempt_at
    if status is EffectStatus.UNKNOWN and waiting:
        # A request that timed out may still be on its way: give it the backoff delay.
        return Decision(Action.WAIT, row.next_attempt_at)
    return Decision(Action.RECONCILE if has_reconcile else Action.TAKE_OVER)


def after_absent(row: JournalRow, policy: RetryPolicy) -> Decision:
    """The reconcile hook found nothing at the receiver: attempt again, if attempts are left."""
    if row.attempt < policy.max_attempts:
        return Decision(Action.TAKE_OVER)
    return Decision(
        Action.FAIL,
        reason=f"the receiver never acted, and all {policy.max_attempts} attempts were used",
    )


_MIN_PAUSE = 0.005
_MAX_PAUSE = 1.0


def pause_before_looking_again(until: datetime | None, now: datetime) -> float:
    """Seconds a WAIT sleeps: until the moment it waits for, but at most a second, so a
    row that changes earlier (another worker finished) is seen soon."""
    if until is None:
        return _MIN_PAUSE
    return min(max((until - now).total_seconds(), _MIN_PAUSE), _MAX_PAUSE)


class Failure(enum.Enum):
    """How to journal an error raised by an attempt."""

    DEFER = "defer"  # rate limited for long: status deferred until the delay has passed
    RETRY = "retry"  # nothing happened (or a short rate limit): retry_wait, then again
    RETRY_LATER = "retry_later"  # nothing happened, tries used up: retry_wait, and raise
    UNKNOWN = "unknown"  # the outcome is open: status unknown, reconcile after the delay
    FAIL = "fail"  # terminal: status failed


@dataclass(frozen=True)
class FailureStep:
    kind: Failure
    delay: float = 0.0


def on_failure(
    exc: BaseException, *, attempt: int, policy: RetryPolicy, tries: int = 1
) -> FailureStep:
    """How to journal attempt number `attempt` (this call's `tries`-th) that raised `exc`.

    Errors that say nothing happened never fail a key for good: past the in-call retries
    the row waits to be tried again (`RETRY_LATER`), and the call raises the error.
    """
    if policy.terminal is not None and policy.terminal(exc):
        return FailureStep(Failure.FAIL)
    retry_after = retry_after_of(exc)
    if retry_after is not None:
        # Rate limited: nothing happened. Wait a short time here, park the run for longer.
        if retry_after <= policy.max_inline_wait and tries < policy.max_attempts:
            return FailureStep(Failure.RETRY, retry_after)
        return FailureStep(Failure.DEFER, retry_after)
    if policy.retryable(exc):
        if tries < policy.max_attempts:
            return FailureStep(Failure.RETRY, policy.delay(tries))
        return FailureStep(Failure.RETRY_LATER, policy.delay(tries))
    if policy.leaves_outcome_open(exc) or not isinstance(exc, Exception):
        # A cancelled task or an interrupted process: the call may have gone out.
        return FailureStep(Failure.UNKNOWN, policy.delay(attempt))
    return FailureStep(Failure.FAIL)


NOT_GIVEN: Any = object()
"""`resolve(completed=...)` was not given (None is a valid result)."""

RESOLVED_AS_FAILED = "ResolvedAsFailed"
"""`error_type` of a row an operator resolved with `failed=`."""


class Resolution(enum.Enum):
    """What an operator says happened at the receiver for an unknown outcome."""

    COMPLETED = "completed"  # it acted: store this result
    ALLOW_RETRY = "allow_retry"  # it did not: the next call attempts again
    FAILED = "failed"  # give up: replays raise the reason


def choose_resolution(
    key: str,
    row: JournalRow | None,
    completed: Any,
    allow_retry: bool,
    failed: str | None,
    *,
    owner_dead: bool = False,
    attempt: int | None = None,
) -> Resolution:
    """Which resolution `resolve(key, ...)` asks for, checked against the row found.

    A running attempt is settled by hand only once its lease is lost (expired, or its
    owner is known dead): while it runs, it records its own outcome. `attempt`, when
    given, is the attempt the operator checked the receiver for: a resolution meant for
    it must never settle a later one (which may have acted since).
    """
    chosen = sum([completed is not NOT_GIVEN, bool(allow_retry), failed is not None])
    if chosen != 1:
        raise EffectError(
            "EffectJournal.resolve(key, ...) needs exactly one of completed=<result>, "
            "allow_retry=True or failed='<reason>'.",
            key=key,
        )
    if row is None:
        raise EffectError(
            f"No effect is journaled under key {key!r}; list open effects with "
            "`langgraph-durable effects` or EffectJournal.open_effects().",
            key=key,
        )
    if row.status not in RESOLVABLE_STATUSES:
        raise EffectError(
            f"Effect {key!r} is {row.status.value}, not unknown; there is nothing to resolve.",
            key=key,
        )
    if attempt is not None and attempt != row.attempt:
        raise EffectError(
            f"Effect {key!r} is at attempt {row.attempt} now, not at attempt {attempt} that "
            "was checked; nothing was changed. Check the receiver for the current attempt "
            "and resolve again.",
            key=key,
        )
    lease_live = (
        row.lease_expires_at is not None
        and row.db_now is not None
        and row.db_now < row.lease_expires_at
    )
    if row.status is EffectStatus.RUNNING and lease_live and not owner_dead:
        raise EffectError(
            f"Effect {key!r} is being attempted now by {row.lease_owner} (lease until "
            f"{row.lease_expires_at}); it records its own outcome. Resolve it only if it is "
            "still running after its lease ends.",
            key=key,
        )
    if allow_retry:
        return Resolution.ALLOW_RETRY
    return Resolution.FAILED if failed is not None else Resolution.COMPLETED


def check_resolved(key: str, done: bool) -> None:
    """The conditional write of a resolution found the row changed under it."""
    if not done:
        raise EffectError(f"Effect {key!r} changed while resolving; look again.", key=key)
