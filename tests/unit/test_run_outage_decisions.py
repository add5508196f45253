"""The pure decisions a worker takes when the database goes away (no database needed)."""

from __future__ import annotations

from datetime import datetime, timezone

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


def test_a_deferral_is_stored_as_the_database_time_it_names_not_as_a_wait() -> None:
    """The journal's retry times and lease ends and durable_sleep's wake-up times are the
    database's clock, the registry's: turned into a wait on this host's clock, a run
    deferred by a worker whose clock ran ahead came due at once, again and again."""
    at = datetime(2026, 12, 3, 9, 0, tzinfo=timezone.utc)
    later = EffectDeferred("rate limited", retry_at=at)
    outcome = outcome_of(run_at(1), error=later)
    assert (outcome.status, outcome.retry_at, outcome.retry_in) == (RunStatus.DEFERRED, at, None)
    assert not outcome.counted
    naive = EffectDeferred("naive", retry_at=at.replace(tzinfo=None))
    assert outcome_of(run_at(1), error=naive).retry_at == at
    unknown = outcome_of(run_at(1), error=EffectDeferred("no time"))
    assert unknown.retry_at is None
    assert unknown.retry_in is not None
    assert 0.5 < unknown.retry_in < 2.0


def test_an_effect_held_by_another_attempt_is_waited_for_not_counted() -> None:
    """A worker that lost the run during an outage may still hold one of its effects: the
    run waits for that lease (deferred), instead of failing attempt after attempt until
    it ends as `error` while the lease is still running (found by the crash matrix)."""
    ends = datetime(2026, 12, 3, 9, 0, tzinfo=timezone.utc)
    held = EffectInProgressError("held", lease_expires_at=ends)
    outcome = outcome_of(run_at(3), error=held)
    assert (outcome.status, outcome.retry_at, outcome.counted) == (RunStatus.DEFERRED, ends, False)
    unknown = outcome_of(run_at(3), error=EffectInProgressError("held"))
    assert unknown.status is RunStatus.DEFERRED
    assert unknown.retry_in is not None
    assert 0.5 < unknown.retry_in < 2.0
