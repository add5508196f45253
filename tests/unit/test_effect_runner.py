"""The effect runner's timing decisions, on the in-memory journal with a manual clock.

Leases, waits, backoffs and deferrals are measured in seconds of the journal's clock, which
the runner's waits move: a test of a 30-second lease takes microseconds and cannot depend
on the machine's speed. `tests/integration/test_journal_parity.py` keeps the memory
journal honest against Postgres.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from langgraph_durable import (
    ConnectionLostError,
    EffectDeferred,
    EffectInProgressError,
    EffectOutcomeUnknown,
    Reconciled,
    RetryLater,
    RetryPolicy,
    effect,
)
from langgraph_durable._db import process_owner
from langgraph_durable.effects._keys import input_hash
from langgraph_durable.effects._memory import ManualClock, MemoryEffectJournal
from langgraph_durable.effects._protocol import EffectStatus

ELSEWHERE = "other-host:4242:1"  # a worker on another host: its liveness cannot be checked


def journal_and_clock() -> tuple[MemoryEffectJournal, ManualClock]:
    clock = ManualClock()
    return MemoryEffectJournal(clock=clock), clock


def held_elsewhere(journal: MemoryEffectJournal, key: str, lease: float) -> None:
    """Another host's worker claimed `key` and is (or was) attempting it."""
    assert journal.as_worker(ELSEWHERE).claim(key, "send", HASH, lease, None) == 1


def seconds_since(clock: ManualClock, start: datetime) -> float:
    return (clock.now - start).total_seconds()


HASH = input_hash(JsonPlusSerializer(), "send", {})
"""The input hash of `send()` with no arguments, as the runner computes it."""


def test_a_live_lease_elsewhere_is_waited_out_then_the_outcome_is_unknown() -> None:
    journal, clock = journal_and_clock()
    held_elsewhere(journal, "k", lease=30)
    start = clock.now

    @effect(name="send", key="k", journal=journal, wait_timeout=60)
    def send() -> str:
        raise AssertionError("must not run: the other worker may have sent it")

    with pytest.raises(EffectOutcomeUnknown, match="never recorded an outcome"):
        send()
    assert 30 <= seconds_since(clock, start) < 31


def test_the_wait_stops_at_wait_timeout_even_for_a_long_lease() -> None:
    journal, clock = journal_and_clock()
    held_elsewhere(journal, "k", lease=300)
    start = clock.now

    @effect(name="send", key="k", journal=journal, wait_timeout=0.2)
    def send() -> str:
        raise AssertionError("must not run")

    with pytest.raises(EffectInProgressError):
        send()
    assert 0.2 <= seconds_since(clock, start) < 0.25


def test_a_finished_attempt_elsewhere_is_replayed_after_the_wait() -> None:
    journal, clock = journal_and_clock()
    held_elsewhere(journal, "k", lease=30)
    other = journal.as_worker(ELSEWHERE)
    waits: list[float] = []

    def sleep_then_finish(seconds: float) -> None:
        waits.append(seconds)
        clock.advance(seconds)
        if len(waits) == 3:  # the other worker finishes while we wait
            assert other.complete("k", 1, "sent by the other worker")

    journal.sleep = sleep_then_finish  # type: ignore[method-assign]

    @effect(name="send", key="k", journal=journal)
    def send() -> str:
        raise AssertionError("must not run")

    assert send() == "sent by the other worker"
    assert all(w <= 1.0 for w in waits)  # it looks again at least every second


def test_backoff_between_not_sent_errors_follows_the_policy() -> None:
    journal, clock = journal_and_clock()
    attempts: list[float] = []
    start = clock.now
    policy = RetryPolicy(max_attempts=4, initial_delay=2, backoff=3, jitter=0)

    @effect(name="send", key="k", journal=journal, retry=policy)
    def send() -> str:
        attempts.append(seconds_since(clock, start))
        if len(attempts) < 4:
            raise ConnectionRefusedError
        return "sent"

    assert send() == "sent"
    assert attempts == [0, 2, 8, 26]


def test_a_timeout_is_reconciled_after_the_backoff_delay() -> None:
    """A request that timed out may still be in flight: ask after the delay, not at once."""
    journal, clock = journal_and_clock()
    start = clock.now
    asked_at: list[float] = []

    def ask(idempotency_key: str) -> Reconciled:
        asked_at.append(seconds_since(clock, start))
        return Reconciled.completed("it arrived")

    @effect(
        name="send",
        key="k",
        journal=journal,
        reconcile=ask,
        retry=RetryPolicy(initial_delay=5, jitter=0),
    )
    def send() -> str:
        raise TimeoutError

    assert send() == "it arrived"
    assert asked_at == [5]


def test_a_deferral_holds_until_its_time_and_not_a_moment_less() -> None:
    journal, clock = journal_and_clock()
    calls: list[float] = []

    @effect(name="send", key="k", journal=journal)
    def send() -> str:
        calls.append(0)
        if len(calls) == 1:
            raise RetryLater(60)
        return "sent"

    with pytest.raises(EffectDeferred) as first:
        send()
    assert first.value.retry_at == clock.now + timedelta(seconds=60)
    clock.advance(59.9)
    with pytest.raises(EffectDeferred):
        send()
    assert len(calls) == 1
    clock.advance(0.1)
    assert send() == "sent"
    row = journal.get("k")
    assert row is not None
    assert (row.status, row.attempt) == (EffectStatus.COMPLETED, 2)


def test_a_dead_owner_is_taken_over_at_once() -> None:
    journal, clock = journal_and_clock()
    host, _pid, _start, boot, namespace = process_owner().split(":")
    dead = journal.as_worker(f"{host}:999999999:1:{boot}:{namespace}")  # no such pid here
    assert dead.claim("k", "send", HASH, 300, None) == 1
    start = clock.now

    @effect(name="send", key="k", journal=journal, retry="idempotent")
    def send() -> str:
        return "sent again with the same key"

    assert send() == "sent again with the same key"
    assert seconds_since(clock, start) == 0


class LosesTheDatabase(MemoryEffectJournal):
    """A journal whose database is away for the first `outage` tries to store a result."""

    def __init__(self, clock: ManualClock, outage: int) -> None:
        super().__init__(clock=clock)
        self.outage = outage
        self.tries = 0

    def complete(self, key: str, attempt: int, result: Any, **kwargs: Any) -> bool:
        self.tries += 1
        if self.tries <= self.outage:
            raise ConnectionLostError("the connection died while storing the result")
        return super().complete(key, attempt, result, **kwargs)


def test_a_result_in_hand_is_stored_once_the_database_is_back() -> None:
    """The receiver acted while the database was away: the result is stored when it is
    back, instead of leaving the attempt running under a live process's lease (the next
    run of the thread then waited for that lease, and found the outcome unknown)."""
    clock = ManualClock()
    journal = LosesTheDatabase(clock, outage=3)
    start = clock.now
    calls: list[str] = []

    @effect(name="send", key="k", journal=journal)
    def send() -> str:
        calls.append("sent")
        return "mail 1"

    assert send() == "mail 1"
    assert calls == ["sent"]
    assert journal.tries == 4
    row = journal.get("k")
    assert row is not None
    assert row.status is EffectStatus.COMPLETED
    assert seconds_since(clock, start) == pytest.approx(0.1 + 0.2 + 0.4)


def test_storing_a_result_gives_up_after_the_attempts_lease() -> None:
    clock = ManualClock()
    journal = LosesTheDatabase(clock, outage=10**6)
    start = clock.now

    @effect(name="send", key="k", journal=journal, lease_ttl=30)
    def send() -> str:
        return "mail 1"

    with pytest.raises(ConnectionLostError):
        send()
    assert 30 <= seconds_since(clock, start) < 40
