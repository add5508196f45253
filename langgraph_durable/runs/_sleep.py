"""`durable_sleep`: a wait inside a node that survives the process, resumed when due.

    def follow_up(state):
        durable_sleep(timedelta(days=3))   # the run parks as deferred; no process waits
        send_reminder(state["customer"])

The first call journals the wake-up time (an effect keyed by where the call happens, so it
is the same call on every resume) and raises `EffectDeferred`: under a worker the run
becomes `deferred` until then, and a worker resumes it when due, not before, across
restarts. Later calls read the journaled time and return once it has passed.

The delay is not part of the effect's input: the first call's wake-up time wins, whatever
later calls pass. A node re-runs from its first line on every resume, so a delay computed
from the clock (`durable_sleep(due - now())`, "sleep until the due time") is another
value each time; as input it made every resume fail with `EffectInputMismatchError`. A
delay at or below zero (the due time has passed) does not wait.

Times are the database's clock, as for the run registry, never the worker's: the wake-up
time is the database's `clock_timestamp()` plus the delay, and each call compares it with
that clock (read once per call, before the journal). On the worker's own clock, a worker
whose clock ran ahead woke a run early, and one whose clock ran behind found a run due
(by the registry's clock) but not yet awake, and deferred it again and again.

Computing the wake-up time acts on nothing outside, so an attempt whose worker died before
it stored its result (killed between the claim and the stored result) is computed again on
resume, never left `unknown` for an operator; a stored one is never computed again.
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta, timezone
from typing import Any

from langgraph.config import get_config

from langgraph_durable import _langgraph
from langgraph_durable._wakeups import asked_to_wake
from langgraph_durable.effects import (
    AsyncEffectJournal,
    EffectJournal,
    RetryPolicy,
    ajournal_here,
    effect,
    journal_here,
    journal_of,
)
from langgraph_durable.errors import EffectDeferred, EffectInputMismatchError, InvalidInputError
from langgraph_durable.runs._model import MAX_SECONDS

__all__ = ["adurable_sleep", "adurable_sleep_until", "durable_sleep", "durable_sleep_until"]

_NAME = "langgraph_durable.durable_sleep"

_COMPUTED_AGAIN = RetryPolicy(unknown_outcome="retry", max_attempts=1000)
"""The sleep's retry policy: an attempt whose outcome is open (its worker died between
the claim and the stored result) is attempted again with the same key, as for a receiver
that honours keys: computing a time acts on nothing outside. Each such death also costs
the run an attempt, so the run's `max_attempts` ends a run that keeps dying long before
this bound does."""


def _seconds(delay: timedelta | float) -> float:
    """The delay in seconds: a finite number (negative: no wait), at most ten years.

    Checked here, so that NaN, infinity or a huge number is a named error and not a
    `ValueError` or `OverflowError` from adding it to a datetime.
    """
    seconds = delay.total_seconds() if isinstance(delay, timedelta) else delay
    if not isinstance(seconds, (int, float)) or isinstance(seconds, bool):
        raise InvalidInputError(f"durable_sleep({delay!r}): pass a timedelta or seconds.")
    if not math.isfinite(seconds) or seconds > MAX_SECONDS:
        raise InvalidInputError(
            f"durable_sleep({delay!r}): pass a finite delay of at most ten years; for a "
            "longer wait, sleep again when this one ends."
        )
    return max(0.0, float(seconds))


def _moment(when: datetime) -> datetime:
    """`when`, checked to be an aware datetime (a naive one names no moment)."""
    if not isinstance(when, datetime):
        raise InvalidInputError(f"durable_sleep_until({when!r}): pass a datetime.")
    if when.tzinfo is None or when.utcoffset() is None:
        raise InvalidInputError(
            f"durable_sleep_until({when!r}): pass a datetime with a time zone "
            "(datetime(..., tzinfo=timezone.utc)); a naive one names no moment."
        )
    return when


def _wake_at(now: datetime, seconds: float) -> str:
    """The wake-up time journaled: `seconds` after `now`, the database's clock. Noted as
    it is computed (`_wakeups.py`): a branch that LangGraph cancels while its time is
    being stored (a parallel branch's deferral came out first) would not reach `_check`."""
    when = now + timedelta(seconds=seconds)
    if seconds > 0:
        asked_to_wake(when)
    return when.astimezone(timezone.utc).isoformat()


def _journaled_earlier(exc: EffectInputMismatchError, found: dict[str, Any] | None) -> str:
    """The wake-up time of a sleep journaled by an earlier version, whose input held the
    delay (so this version's call, without it, does not match): as stored. Resuming a run
    asleep across an upgrade must neither fail nor sleep again. Anything else under the
    key is the mismatch it says."""
    if (
        found is None
        or found.get("status") != "completed"
        or not isinstance(found.get("result"), str)
    ):
        raise exc
    return str(found["result"])


def _check(wake: str, now: datetime) -> None:
    """Return once `now` (the database's clock) has reached the wake-up time; else defer."""
    when = datetime.fromisoformat(wake)
    if now < when:
        asked_to_wake(when)  # beside a parallel branch's later one (`_wakeups.py`)
        raise EffectDeferred(f"durable_sleep: sleeping until {when.isoformat()}", retry_at=when)


def _sleep(journal: EffectJournal, seconds: float, now: datetime | None = None) -> None:
    """Journal the wake-up time `seconds` after the database's `now` (read here if not
    given) unless one is journaled already, and defer until it."""
    now = journal.now() if now is None else now

    # No parameters: the journal's input hash covers none, so a resume that passes
    # another delay reads the first call's wake-up time instead of failing.
    @effect(name=_NAME, interrupt_guard=False, retry=_COMPUTED_AGAIN)
    def wake_at() -> str:
        return _wake_at(now, seconds)

    try:
        wake = wake_at()
    except EffectInputMismatchError as exc:
        stored = journal_of(_langgraph.checkpointer_of(get_config()))
        found = stored.details(exc.key) if isinstance(stored, EffectJournal) and exc.key else None
        wake = _journaled_earlier(exc, found)
    _check(wake, now)


async def _asleep(journal: AsyncEffectJournal, seconds: float, now: datetime | None = None) -> None:
    """Async `_sleep`."""
    now = await journal.anow() if now is None else now

    @effect(name=_NAME, interrupt_guard=False, retry=_COMPUTED_AGAIN)
    async def wake_at() -> str:
        return _wake_at(now, seconds)

    try:
        wake = await wake_at()
    except EffectInputMismatchError as exc:
        stored = journal_of(_langgraph.checkpointer_of(get_config()))
        found = (
            await stored.adetails(exc.key)
            if isinstance(stored, AsyncEffectJournal) and exc.key
            else None
        )
        wake = _journaled_earlier(exc, found)
    _check(wake, now)


def durable_sleep(delay: timedelta | float) -> None:
    """Sleep `delay` (a timedelta or seconds) without holding a process.

    The first call's wake-up time is kept: on a resume the delay passed is not looked at
    (see the module docstring), so computing it from the clock is fine.

    Raises:
        EffectDeferred: Until the wake-up time, with `retry_at` set to it.
        InvalidInputError: The delay is not a number, not finite, or over ten years.
    """
    seconds = _seconds(delay)
    _sleep(journal_here(), seconds)


async def adurable_sleep(delay: timedelta | float) -> None:
    """Async `durable_sleep`, for async nodes."""
    seconds = _seconds(delay)
    await _asleep(ajournal_here(), seconds)


def durable_sleep_until(when: datetime) -> None:
    """Sleep until `when` (a datetime with a time zone) without holding a process:
    `durable_sleep` of the time left, counted on the database's clock (so the run wakes
    at `when` by that clock, whatever the worker's). A time already past does not wait.

    Raises:
        EffectDeferred: Until the wake-up time, with `retry_at` set to it.
        InvalidInputError: `when` is not a datetime, has no time zone, or is more than
            ten years away.
    """
    when = _moment(when)
    journal = journal_here()
    now = journal.now()  # the time left is counted on the database's clock
    _sleep(journal, _seconds((when - now).total_seconds()), now)


async def adurable_sleep_until(when: datetime) -> None:
    """Async `durable_sleep_until`, for async nodes."""
    when = _moment(when)
    journal = ajournal_here()
    now = await journal.anow()
    await _asleep(journal, _seconds((when - now).total_seconds()), now)
