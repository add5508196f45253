"""Per-execution bookkeeping (`_identity.py`): counts of a live execution are never dropped."""

from __future__ import annotations

from langgraph_durable._identity import CallCounts, FirstSeen, NamespaceOrigins


class Scratchpad:
    """Stands in for LangGraph's: neither hashable by value nor weak-referenceable."""

    __slots__ = ()


def test_a_live_execution_keeps_its_counts_however_many_others_come_and_go() -> None:
    counts = CallCounts(capacity=4)
    live = Scratchpad()
    assert counts.next(live, "charge") == 0
    for _ in range(100):  # executions that ended: nothing holds their scratchpads
        counts.next(Scratchpad(), "charge")
    assert counts.next(live, "charge") == 1  # not restarted: a new ordinal, a new key
    assert len(counts) <= 4  # the ended ones were dropped


def test_more_live_executions_than_the_capacity_grow_the_map() -> None:
    counts = CallCounts(capacity=2)
    alive = [Scratchpad() for _ in range(10)]
    for pad in alive:
        assert counts.next(pad, "send") == 0
    assert [counts.next(pad, "send") for pad in alive] == [1] * 10


def test_first_seen_values_stay_while_their_owner_lives() -> None:
    seen: FirstSeen[int] = FirstSeen(capacity=2)
    answers: list[int] = []
    assert seen.value(answers, lambda: 7) == 7
    for n in range(50):
        seen.value([n], lambda: 0)
    assert seen.value(answers, lambda: 9) == 7


def test_namespace_origins_keep_the_most_recently_used() -> None:
    origins = NamespaceOrigins(capacity=2)
    origins.record("t", "a:1", ("a", 1, ()))
    origins.record("t", "b:2", ("b", 2, ()))
    assert origins.find("t", "a:1") == ("a", 1, ())  # used: kept over b
    origins.record("t", "c:3", ("c", 3, ()))
    assert origins.find("t", "b:2") is None
    assert origins.find("t", "a:1") == ("a", 1, ())
    assert origins.find("other", "a:1") is None
