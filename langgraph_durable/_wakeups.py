"""The earliest time a run's execution asked to be woken, across its parallel branches.

A node that sleeps (`durable_sleep`), is rate limited (`EffectDeferred`) or finds its
effect held by another attempt (`EffectInProgressError`) raises, and the run is parked
until the time the error names. With parallel branches each may raise its own, and
LangGraph lets one of them out: a branch sleeping 3 seconds beside one sleeping an hour
woke an hour late. So each raise site also notes its time here, and the worker parks the
run until the earliest. Waking early is safe: each sleep or deferral checks its own
journaled time again and parks the run anew.

A context variable holds the list the worker made for one execution; the graph's tasks
and threads get a copy of the context, which holds the same list.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import datetime, timezone

__all__ = ["asked_to_wake", "collecting_wakeups", "earliest"]

_asked: ContextVar[list[datetime] | None] = ContextVar("langgraph_durable_wakeups", default=None)


@contextmanager
def collecting_wakeups() -> Iterator[list[datetime]]:
    """Around one execution of a run's graph: the wake-up times its branches noted."""
    found: list[datetime] = []
    token = _asked.set(found)
    try:
        yield found
    finally:
        _asked.reset(token)


def asked_to_wake(when: datetime | None) -> None:
    """Note that the execution under way asks to be woken at `when` (the database's
    clock); nothing outside a worker's execution."""
    found = _asked.get()
    if found is not None and when is not None:
        found.append(when)


def earliest(times: list[datetime]) -> datetime | None:
    """The earliest of `times` (naive ones taken as UTC, as the registry stores them)."""
    aware = [t if t.tzinfo is not None else t.replace(tzinfo=timezone.utc) for t in times]
    return min(aware, default=None)
