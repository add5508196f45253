"""The pure decisions a worker takes when the database goes away (no database needed)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import psycopg
import pytest
from psycopg_pool import PoolTimeout

from langgraph_durable import (
    DatabaseUnreachableError,
    EffectDeferred,
    EffectInProgressError,
    PoolBusyError,
    PoolClosedError,
    PoolTimeoutError,
    RunStatus,
    TransactionConflictError,
)
from langgraph_durable._db.connections import mark_from_our_connections
from langgraph_durable.runs._model import Next, Outage, Run, is_outage, outcome_of


def run_at(attempt: int, max_attempts: int = 3) -> Run:
    return Run(
        run_id="r",
        thread_id="t",
        graph_name="g",
        graph_version="1",
        status=RunStatus.RUNNING,
        status_reason=None,
        multitask_strategy="enqueue",
        durability="sync",
        attempt=attempt,
        max_attempts=max_attempts,
        config={},
        metadata={},
        fencing_token=1,
    )


def ours(error: BaseException) -> BaseException:
    """`error` as if raised on a connection langgraph-durable lent."""
    mark_from_our_connections(error)
    return error


@pytest.mark.parametrize(
    ("error", "outage"),
    [
        (ours(psycopg.OperationalError("server closed the connection unexpectedly")), True),
        (PoolTimeoutError("no connection came from the pool"), True),
        (PoolBusyError("max_waiting calls already wait"), True),
        (DatabaseUnreachableError("down"), True),
        (PoolClosedError("the pool is closed"), False),
        (TransactionConflictError("deadlock"), True),
        (ours(psycopg.errors.UniqueViolation("duplicate key")), False),
        (ValueError("a bug in a node"), False),
        # The same failures on a node's own connection are the run's errors.
        (psycopg.OperationalError("server closed the connection unexpectedly"), False),
        (PoolTimeout("couldn't get a connection after 30.00 sec"), False),
        (psycopg.errors.DeadlockDetected("deadlock detected"), False),
    ],
)
def test_what_counts_as_an_outage(error: BaseException, outage: bool) -> None:
    assert is_outage(error) is outage


def test_an_outage_never_ends_a_run_even_on_its_last_attempt() -> None:
    error = ours(psycopg.OperationalError("terminating connection due to administrator command"))
    outcome = outcome_of(run_at(3, max_attempts=3), error=error)
    assert (outcome.next, outcome.status) == (Next.FINISH, RunStatus.PENDING)
    assert outcome.reason == (
        "database unavailable: terminating connection due to administrator command"
    )
    assert outcome.retry_in is not None
    assert outcome.retry_in > 0
    # Any other error on the last attempt still ends the run.
    assert outcome_of(run_at(3, max_attempts=3), error=ValueError("x")).status is RunStatus.ERROR


def test_outage_pauses_grow_and_end_at_the_timeout() -> None:
    outage = Outage(give_up_after=10.0)
    pauses = [outage.failed(now=t) for t in (100.0, 100.5, 101.0, 101.5)]
    assert all(p is not None for p in pauses)
    assert pauses[0] < pauses[-1]  # type: ignore[operator]
    # Never sleeps past the moment it would give up.
    assert outage.failed(now=109.9) == pytest.approx(0.1, abs=1e-9)
    assert outage.failed(now=110.0) is None
    assert outage.over(now=111.0) == 11.0
    assert outage.over(now=112.0) is None  # no outage any more
    assert Outage(give_up_after=None).failed(now=1e9) is not None


def test_a_deferral_is_stored_as_a_wait_not_as_this_hosts_clock_time() -> None:
    now = datetime(2026, 12, 3, 9, 0, tzinfo=timezone.utc)
    later = EffectDeferred("rate limited", retry_at=now + timedelta(minutes=5))
    outcome = outcome_of(run_at(1), error=later, now=now)
    assert (outcome.status, outcome.retry_at, outcome.retry_in) == (
        RunStatus.DEFERRED,
        None,
        300.0,
    )
    assert not outcome.counted
    past = EffectDeferred("due", retry_at=now - timedelta(minutes=5))
    assert outcome_of(run_at(1), error=past, now=now).retry_in == 0.0
    naive = EffectDeferred("naive", retry_at=(now + timedelta(seconds=30)).replace(tzinfo=None))
    assert outcome_of(run_at(1), error=naive, now=now).retry_in == 30.0
    unknown = outcome_of(run_at(1), error=EffectDeferred("no time"), now=now)
    assert unknown.retry_in is not None
    assert 0.5 < unknown.retry_in < 2.0


def test_an_effect_held_by_another_attempt_is_waited_for_not_counted() -> None:
    """A worker that lost the run during an outage may still hold one of its effects: the
    run waits for that lease (deferred), instead of failing attempt after attempt until
    it ends as `error` while the lease is still running (found by the crash matrix)."""
    now = datetime(2026, 12, 3, 9, 0, tzinfo=timezone.utc)
    held = EffectInProgressError("held", lease_expires_at=now + timedelta(seconds=90))
    outcome = outcome_of(run_at(3), error=held, now=now)
    assert (outcome.status, outcome.retry_in, outcome.counted) == (RunStatus.DEFERRED, 90.0, False)
    unknown = outcome_of(run_at(3), error=EffectInProgressError("held"), now=now)
    assert unknown.status is RunStatus.DEFERRED
    assert unknown.retry_in is not None
    assert 0.5 < unknown.retry_in < 2.0
