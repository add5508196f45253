"""Per-execution bookkeeping (`_identity.py`): values of a live execution are never dropped."""

from __future__ import annotations

from langgraph_durable._identity import CallCounts, FirstSeen, NamespaceOrigins, OwnerTable


class Scratchpad:
    """Stands in for LangGraph's: neither hashable by value nor weak-referenceable."""

    __slots__ = ()


def test_a_live_execution_keeps_its_counts_however_many_others_come_and_go() -> None:
    table = OwnerTable(capacity=4)
    counts = CallCounts(table)
    live = Scratchpad()
    assert counts.next(live, "charge") == 0
    for _ in range(100):  # executions that ended: nothing holds their scratchpads
        counts.next(Scratchpad(), "charge")
    assert counts.next(live, "charge") == 1  # not restarted: a new ordinal, a new key
    assert len(table) <= 4  # the ended ones were dropped


def test_more_live_executions_than_the_capacity_grow_the_table() -> None:
    counts = CallCounts(OwnerTable(capacity=2))
    alive = [Scratchpad() for _ in range(10)]
    for pad in alive:
        assert counts.next(pad, "send") == 0
    assert [counts.next(pad, "send") for pad in alive] == [1] * 10


def test_an_owner_used_by_several_counters_is_still_dropped_when_it_ends() -> None:
    """Effects and events count per execution apart; both must let an ended one go."""
    table = OwnerTable(capacity=4)
    effects, events = CallCounts(table), CallCounts(table)
    for _ in range(100):
        pad = Scratchpad()
        effects.next(pad, "charge")
        events.next(pad, "charged")
    del pad
    effects.next(Scratchpad(), "charge")
    assert len(table) <= 4


def test_first_seen_values_stay_while_their_owner_lives() -> None:
    table = OwnerTable(capacity=2)
    seen: FirstSeen[int] = FirstSeen(table)
    answers: list[int] = []
    assert seen.value(answers, lambda: 7) == 7
    for n in range(50):
        seen.value([n], lambda: 0)
    assert seen.value(answers, lambda: 9) == 7


def test_a_subgraph_origin_lives_as_long_as_the_parent_task_execution() -> None:
    table = OwnerTable(capacity=2)
    origins = NamespaceOrigins(table)
    counts = CallCounts(table)
    parent = Scratchpad()
    origins.record("t", "sub:1", ("sub", 3, ("__pregel_pull", "sub")), parent)
    for _ in range(50):  # other executions come and go meanwhile
        counts.next(Scratchpad(), "x")
    assert origins.find("t", "sub:1") == ("sub", 3, ("__pregel_pull", "sub"))
    del parent
    for _ in range(50):
        counts.next(Scratchpad(), "x")
    assert origins.find("t", "sub:1") is None  # the parent's execution ended
    assert origins.find("other", "sub:1") is None
