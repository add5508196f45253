"""`durable_sleep`: a wait inside a node that survives the process, resumed when due.

    def follow_up(state):
        durable_sleep(timedelta(days=3))   # the run parks as deferred; no process waits
        send_reminder(state["customer"])

The first call journals the wake-up time (an effect keyed by where the call happens, so it
is the same call on every resume) and raises `EffectDeferred`: under a worker the run
becomes `deferred` until then, and a worker resumes it when due, not before, across
restarts. Later calls read the journaled time and return once it has passed.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from langgraph_durable.effects import effect
from langgraph_durable.errors import EffectDeferred, InvalidInputError

__all__ = ["adurable_sleep", "durable_sleep"]

_NAME = "langgraph_durable.durable_sleep"


def _seconds(delay: timedelta | float) -> float:
    seconds = delay.total_seconds() if isinstance(delay, timedelta) else delay
    if not isinstance(seconds, (int, float)) or isinstance(seconds, bool) or seconds < 0:
        raise InvalidInputError(f"durable_sleep({delay!r}): pass a timedelta or seconds >= 0.")
    return float(seconds)


@effect(name=_NAME, interrupt_guard=False)
def _wake_at(seconds: float) -> str:
    return (datetime.now(timezone.utc) + timedelta(seconds=seconds)).isoformat()


@effect(name=_NAME, interrupt_guard=False)
async def _awake_at(seconds: float) -> str:
    return (datetime.now(timezone.utc) + timedelta(seconds=seconds)).isoformat()


def _check(wake: str) -> None:
    when = datetime.fromisoformat(wake)
    if datetime.now(timezone.utc) < when:
        raise EffectDeferred(f"durable_sleep: sleeping until {when.isoformat()}", retry_at=when)


def durable_sleep(delay: timedelta | float) -> None:
    """Sleep `delay` (a timedelta or seconds) without holding a process.

    Raises:
        EffectDeferred: Until the wake-up time, with `retry_at` set to it.
    """
    _check(_wake_at(_seconds(delay)))


async def adurable_sleep(delay: timedelta | float) -> None:
    """Async `durable_sleep`, for async nodes."""
    _check(await _awake_at(_seconds(delay)))
