"""The in-memory journal follows the Postgres journal's rules, scenario by scenario.

Each scenario drives `@effect` against one journal and reports what the receiver saw and
the final row; both journals must report the same. The memory journal is what fast tests
use (`tests/unit/test_effect_runner.py`), so a difference here would make them lie.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from psycopg_pool import ConnectionPool

from langgraph_durable import (
    DurablePostgresSaver,
    EffectJournal,
    Reconciled,
    RetryLater,
    RetryPolicy,
    effect,
)
from langgraph_durable.effects._memory import ManualClock, MemoryEffectJournal

FAST = RetryPolicy(initial_delay=0.001, jitter=0)


@pytest.fixture(scope="module")
def postgres_journal(db_dsn: str) -> Iterator[EffectJournal]:
    with DurablePostgresSaver.from_conn_string(db_dsn) as saver:
        saver.setup()
        assert isinstance(saver.conn, ConnectionPool)
        yield EffectJournal(saver.conn)


Outcome = tuple[Any, ...]


def run(journal: Any, scenario: Callable[[Any, str, list[str]], Any]) -> Outcome:
    """(what each call returned or raised, receiver calls, final status, attempt, error)."""
    key = f"parity-{uuid.uuid4()}"
    calls: list[str] = []
    results = scenario(journal, key, calls)
    row = journal.get(key)
    final = (row.status.value, row.attempt, row.error_type) if row else None
    return results, calls, final


def attempt(fn: Callable[[], Any]) -> str:
    try:
        return f"= {fn()!r}"
    except Exception as exc:
        return f"! {type(exc).__name__}"


def replayed(journal: Any, key: str, calls: list[str]) -> Any:
    @effect(key=key, journal=journal, name="parity")
    def act() -> str:
        calls.append("act")
        return "done"

    return [attempt(act), attempt(act)]


def not_sent_twice(journal: Any, key: str, calls: list[str]) -> Any:
    @effect(key=key, journal=journal, name="parity", retry=FAST)
    def act() -> str:
        calls.append("act")
        if len(calls) < 3:
            raise ConnectionRefusedError
        return "done"

    return [attempt(act)]


def timed_out(journal: Any, key: str, calls: list[str]) -> Any:
    @effect(key=key, journal=journal, name="parity", retry=FAST)
    def act() -> str:
        calls.append("act")
        raise TimeoutError("no answer")

    return [attempt(act), attempt(act)]


def timed_out_idempotent(journal: Any, key: str, calls: list[str]) -> Any:
    policy = RetryPolicy(initial_delay=0.001, jitter=0, unknown_outcome="retry")

    @effect(key=key, journal=journal, name="parity", retry=policy)
    def act() -> str:
        calls.append("act")
        if len(calls) == 1:
            raise TimeoutError("no answer")
        return "done"

    return [attempt(act)]


def timed_out_reconciled(journal: Any, key: str, calls: list[str]) -> Any:
    def ask(idempotency_key: str) -> Reconciled:
        calls.append("ask")
        return Reconciled.completed("found")

    @effect(key=key, journal=journal, name="parity", retry=FAST, reconcile=ask)
    def act() -> str:
        calls.append("act")
        raise ConnectionResetError

    return [attempt(act), attempt(act)]


def deferred(journal: Any, key: str, calls: list[str]) -> Any:
    @effect(key=key, journal=journal, name="parity")
    def act() -> str:
        calls.append("act")
        if len(calls) == 1:
            raise RetryLater(0)
        return "done"

    return [attempt(act), attempt(act)]


def failed(journal: Any, key: str, calls: list[str]) -> Any:
    @effect(key=key, journal=journal, name="parity")
    def act() -> str:
        calls.append("act")
        raise ValueError("no such order")

    return [attempt(act), attempt(act)]


def resolved(journal: Any, key: str, calls: list[str]) -> Any:
    @effect(key=key, journal=journal, name="parity")
    def act() -> str:
        calls.append("act")
        raise TimeoutError

    first = attempt(act)
    journal.resolve(key, completed={"id": 7})
    return [first, attempt(act)]


def other_input(journal: Any, key: str, calls: list[str]) -> Any:
    @effect(key=key, journal=journal, name="parity")
    def act(amount: int) -> int:
        calls.append("act")
        return amount

    return [attempt(lambda: act(1)), attempt(lambda: act(2))]


def unserializable(journal: Any, key: str, calls: list[str]) -> Any:
    @effect(key=key, journal=journal, name="parity", retry="idempotent")
    def act() -> Any:
        calls.append("act")
        return threading.Lock()

    return [attempt(act), attempt(act)]


SCENARIOS = [
    replayed,
    not_sent_twice,
    timed_out,
    timed_out_idempotent,
    timed_out_reconciled,
    deferred,
    failed,
    resolved,
    other_input,
    unserializable,
]


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.__name__)
def test_both_journals_tell_the_same_story(
    postgres_journal: EffectJournal, scenario: Callable[[Any, str, list[str]], Any]
) -> None:
    in_memory = run(MemoryEffectJournal(clock=ManualClock()), scenario)
    on_postgres = run(postgres_journal, scenario)
    assert in_memory == on_postgres


def test_the_stories_are_the_ones_we_mean() -> None:
    """A few outcomes spelled out, so that parity is not parity in nonsense."""
    journal = MemoryEffectJournal(clock=ManualClock())
    assert run(journal, replayed)[1:] == (["act"], ("completed", 1, None))
    assert run(journal, timed_out)[0] == ["! EffectOutcomeUnknown"] * 2
    assert run(journal, timed_out_reconciled)[1] == ["act", "ask"]
    assert run(journal, unserializable)[0] == [
        "! EffectResultNotStoredError",
        "! EffectOutcomeUnknown",
    ]
    assert run(journal, other_input)[0] == ["= 1", "! EffectInputMismatchError"]
