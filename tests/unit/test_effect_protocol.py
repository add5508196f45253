"""Every decision of the effect protocol, without a database (effects/_protocol.py)."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from langgraph_durable import EffectInputMismatchError, RetryLater, RetryPolicy
from langgraph_durable.effects._protocol import (
    RESULT_NOT_STORED,
    Action,
    EffectStatus,
    Failure,
    JournalRow,
    after_absent,
    decide,
    on_failure,
)

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=timezone.utc)
SECOND = timedelta(seconds=1)
PLAIN = RetryPolicy(jitter=0)
IDEMPOTENT = RetryPolicy(jitter=0, unknown_outcome="retry")


def row(status: EffectStatus, **changes: Any) -> JournalRow:
    base = JournalRow(
        key="k", effect_name="send", input_hash="h", status=status, attempt=1, db_now=NOW
    )
    return replace(base, **changes)


def decision(found: JournalRow, **options: Any) -> Any:
    kwargs: dict[str, Any] = {
        "name": "send",
        "input_hash": "h",
        "policy": PLAIN,
        "has_reconcile": False,
        "now": NOW,
    }
    kwargs.update(options)
    return decide(found, **kwargs)


def test_a_key_names_one_effect_and_one_input() -> None:
    with pytest.raises(EffectInputMismatchError, match="belongs to effect 'send'"):
        decision(row(EffectStatus.COMPLETED), name="other")
    with pytest.raises(EffectInputMismatchError, match="input hash h and now with x"):
        decision(row(EffectStatus.COMPLETED), input_hash="x")


def test_completed_replays_and_failed_raises_again() -> None:
    assert decision(row(EffectStatus.COMPLETED)).action is Action.REPLAY
    assert decision(row(EffectStatus.FAILED)).action is Action.RAISE_FAILED


@pytest.mark.parametrize(
    ("status", "early", "due"),
    [
        (EffectStatus.DEFERRED, Action.RAISE_DEFERRED, Action.TAKE_OVER),
        (EffectStatus.RETRY_WAIT, Action.WAIT, Action.TAKE_OVER),
    ],
)
def test_deferred_and_retry_wait_wait_for_their_time(
    status: EffectStatus, early: Action, due: Action
) -> None:
    later = NOW + 5 * SECOND
    found = decision(row(status, next_attempt_at=later))
    assert (found.action, found.until) == (early, later)
    assert decision(row(status, next_attempt_at=NOW - SECOND)).action is due
    assert decision(row(status, next_attempt_at=None)).action is due


def test_a_live_lease_is_waited_for_no_longer_than_the_wait_limit() -> None:
    live = row(EffectStatus.RUNNING, lease_expires_at=NOW + 300 * SECOND)
    found = decision(live, wait_limit=timedelta(milliseconds=50))
    assert found.action is Action.WAIT
    assert found.until == NOW + timedelta(milliseconds=50)  # not the lease's end, not 1 s
    found = decision(live, wait_limit=timedelta(seconds=30), waited=timedelta(seconds=29))
    assert found.until == NOW + SECOND
    assert decision(live, waited=timedelta(seconds=30)).action is Action.RAISE_IN_PROGRESS
    assert decision(live, wait_limit=timedelta(0)).action is Action.RAISE_IN_PROGRESS


def test_a_lease_shorter_than_the_wait_is_waited_for_until_it_ends() -> None:
    live = row(EffectStatus.RUNNING, lease_expires_at=NOW + 2 * SECOND)
    assert decision(live).until == NOW + 2 * SECOND


@pytest.mark.parametrize(
    "found",
    [
        row(EffectStatus.RUNNING, lease_expires_at=NOW - SECOND),  # the lease ran out
        row(EffectStatus.RUNNING, lease_expires_at=None),
        row(EffectStatus.UNKNOWN),
    ],
    ids=["expired", "no-lease", "unknown"],
)
def test_an_open_outcome_is_reconciled_retried_only_for_idempotent_receivers_or_raised(
    found: JournalRow,
) -> None:
    raised = decision(found)
    assert raised.action is Action.RAISE_UNKNOWN
    assert raised.reason == "the receiver may not honour the key"
    assert decision(found, has_reconcile=True).action is Action.RECONCILE
    assert decision(found, policy=IDEMPOTENT).action is Action.TAKE_OVER
    assert decision(found, policy=IDEMPOTENT, has_reconcile=True).action is Action.RECONCILE


def test_a_dead_owner_on_this_host_counts_as_an_expired_lease() -> None:
    live = row(EffectStatus.RUNNING, lease_expires_at=NOW + 300 * SECOND)
    assert decision(live, owner_dead=True).action is Action.RAISE_UNKNOWN
    assert decision(live, owner_dead=True, policy=IDEMPOTENT).action is Action.TAKE_OVER


def test_idempotent_retries_after_unknown_outcomes_stop_at_max_attempts() -> None:
    spent = row(EffectStatus.UNKNOWN, attempt=3)
    found = decision(spent, policy=IDEMPOTENT)
    assert found.action is Action.RAISE_UNKNOWN
    assert found.reason == "all 3 attempts were used"
    assert decision(spent, policy=IDEMPOTENT, has_reconcile=True).action is Action.RECONCILE


def test_a_result_that_could_not_be_stored_needs_a_decision() -> None:
    stuck = row(EffectStatus.UNKNOWN, error_type=RESULT_NOT_STORED)
    found = decision(stuck, policy=IDEMPOTENT)
    assert found.action is Action.RAISE_UNKNOWN
    assert found.reason == "its result could not be stored"
    assert decision(stuck, has_reconcile=True).action is Action.RECONCILE  # asks, never acts


def test_an_unknown_row_waits_out_its_delay_before_reconcile_or_retry() -> None:
    later = NOW + SECOND
    fresh = row(EffectStatus.UNKNOWN, next_attempt_at=later, error_type="TimeoutError")
    assert decision(fresh, has_reconcile=True).until == later
    assert decision(fresh, policy=IDEMPOTENT).action is Action.WAIT
    assert decision(fresh).action is Action.RAISE_UNKNOWN  # nothing to wait for
    due = replace(fresh, next_attempt_at=NOW - SECOND)
    assert decision(due, has_reconcile=True).action is Action.RECONCILE


def test_after_reconcile_found_nothing_attempts_left_decide() -> None:
    assert after_absent(row(EffectStatus.UNKNOWN, attempt=2), PLAIN).action is Action.TAKE_OVER
    spent = after_absent(row(EffectStatus.UNKNOWN, attempt=3), PLAIN)
    assert spent.action is Action.FAIL
    assert "all 3 attempts" in spent.reason


class NotSent(Exception):
    pass


@pytest.mark.parametrize(
    ("error", "tries", "kind"),
    [
        (RetryLater(60), 1, Failure.DEFER),  # a long rate limit parks the run
        (RetryLater(2.5), 1, Failure.RETRY),  # a short one is waited out here
        (RetryLater(2.5), 3, Failure.DEFER),  # unless the attempts are used up
        (ConnectionRefusedError(), 1, Failure.RETRY),
        (ConnectionRefusedError(), 3, Failure.RETRY_LATER),  # tries used up: the key stays free
        (TimeoutError(), 1, Failure.UNKNOWN),
        (TimeoutError(), 3, Failure.UNKNOWN),  # unknown whatever the count
        (ConnectionResetError(), 1, Failure.UNKNOWN),
        (BrokenPipeError(), 1, Failure.UNKNOWN),
        (KeyboardInterrupt(), 1, Failure.UNKNOWN),
        (ValueError("bad amount"), 1, Failure.FAIL),
        (NotSent(), 1, Failure.FAIL),  # not declared
    ],
)
def test_errors_are_journaled_by_what_they_say_about_the_receiver(
    error: BaseException, tries: int, kind: Failure
) -> None:
    assert on_failure(error, attempt=tries + 4, tries=tries, policy=PLAIN).kind is kind


def test_a_terminal_error_fails_at_once_whatever_else_it_is() -> None:
    policy = RetryPolicy(terminal=lambda e: "card declined" in str(e))
    assert on_failure(TimeoutError("card declined"), attempt=1, policy=policy).kind is Failure.FAIL
    assert on_failure(TimeoutError("no answer"), attempt=1, policy=policy).kind is Failure.UNKNOWN


def test_a_policy_can_declare_its_clients_errors() -> None:
    policy = RetryPolicy(retry_on=(NotSent,), unknown_on=(ValueError,))
    assert on_failure(NotSent(), attempt=1, policy=policy).kind is Failure.RETRY
    assert on_failure(ValueError(), attempt=1, policy=policy).kind is Failure.UNKNOWN
    assert on_failure(TimeoutError(), attempt=1, policy=policy).kind is Failure.FAIL


def test_delays_grow_and_are_capped() -> None:
    policy = RetryPolicy(initial_delay=1, backoff=2, max_delay=3, jitter=0)
    assert [policy.delay(n) for n in (1, 2, 3, 4)] == [1, 2, 3, 3]
    deferred = on_failure(RetryLater(7), attempt=1, policy=policy)
    assert (deferred.kind, deferred.delay) == (Failure.DEFER, 7)
    waited = on_failure(RetryLater(1.5), attempt=1, policy=policy)
    assert (waited.kind, waited.delay) == (Failure.RETRY, 1.5)
    assert on_failure(ConnectionRefusedError(), attempt=7, tries=2, policy=policy).delay == 2


def test_the_schema_allows_exactly_the_statuses_of_the_enum() -> None:
    from langgraph_durable._sql import SCHEMA

    check = SCHEMA.split("status TEXT NOT NULL CHECK (status IN", 1)[1].split(")", 1)[0]
    listed = {part.strip().strip("'") for part in check.replace("(", "").split(",")}
    assert listed == {status.value for status in EffectStatus}
