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
    origins.enter("t", "sub:1", 0, ("sub", 3, ("__pregel_pull", "sub")), parent)
    for _ in range(50):  # other executions come and go meanwhile
        counts.next(Scratchpad(), "x")
    assert origins.find("t", "sub:1") == ("sub", 3, ("__pregel_pull", "sub"))
    del parent
    for _ in range(50):
        counts.next(Scratchpad(), "x")
    assert origins.find("t", "sub:1") is None  # the parent's execution ended
    assert origins.find("other", "sub:1") is None


class Counter:
    """Stands for LangGraph's subgraph counter: one object for all attempts of a task."""


def test_a_retry_s_subgraph_numbers_are_put_back_to_the_first_attempt_s() -> None:
    origins = NamespaceOrigins(OwnerTable())
    counter, first, second = Counter(), Scratchpad(), Scratchpad()
    origin = ("outer", 1, ("__pregel_pull", "outer"))
    for level in range(3):  # the first attempt starts three subgraphs
        origins.enter("t", "outer:a", level, origin, first, counter)
    for raw in ("outer:a|in:b", "outer:a|1|in:c", "outer:a|2|in:d"):
        assert origins.normalize("t", raw) == raw  # a first attempt's stay as they are
    for level in range(3, 6):  # the retry: LangGraph goes on counting
        origins.enter("t", "outer:a", level, origin, second, counter)
    assert origins.normalize("t", "outer:a|3|in:e") == "outer:a|in:e"
    assert origins.normalize("t", "outer:a|4|in:f") == "outer:a|1|in:f"
    assert origins.normalize("t", "outer:a|5") == "outer:a|2"
    assert origins.normalize("t", "outer:a|7|in:g") == "outer:a|7|in:g"  # never entered
    assert origins.normalize("other", "outer:a|3|in:e") == "outer:a|3|in:e"
    assert origins.find("t", "outer:a") == origin  # recorded again by the retry


def test_nested_subgraphs_and_an_attempt_that_started_none() -> None:
    origins = NamespaceOrigins(OwnerTable())
    counter, inner_counter = Counter(), Counter()
    origin = ("outer", 1, ())
    attempts = [Scratchpad() for _ in range(3)]
    # The first attempt fails before any subgraph; the second starts two, the inner one
    # starting a subgraph of its own; the third does the same.
    origins.enter("t", "outer:a", 0, origin, attempts[1], counter)
    origins.enter("t", "outer:a", 1, origin, attempts[1], counter)
    inner_first, inner_second = Scratchpad(), Scratchpad()
    origins.enter("t", "outer:a|1|mid:b", 0, ("mid", 1, ()), inner_first, inner_counter)
    assert origins.normalize("t", "outer:a|1|mid:b|deep:c") == "outer:a|1|mid:b|deep:c"
    origins.enter("t", "outer:a", 2, origin, attempts[2], counter)
    origins.enter("t", "outer:a", 3, origin, attempts[2], counter)
    origins.enter("t", "outer:a|3|mid:b", 0, ("mid", 1, ()), inner_second, Counter())
    assert origins.normalize("t", "outer:a|3|mid:b|deep:c") == "outer:a|1|mid:b|deep:c"
    assert origins.find("t", "outer:a|1|mid:b") == ("mid", 1, ())


def test_entries_of_ended_executions_go() -> None:
    table = OwnerTable(capacity=2)
    origins = NamespaceOrigins(table)
    counter, first, second = Counter(), Scratchpad(), Scratchpad()
    origins.enter("t", "outer:a", 0, ("outer", 1, ()), first, counter)
    origins.enter("t", "outer:a", 1, ("outer", 1, ()), second, counter)
    assert origins.normalize("t", "outer:a|1|in:b") == "outer:a|in:b"
    del counter, first, second
    for _ in range(50):  # other executions come and go
        CallCounts(table).next(Scratchpad(), "x")
    assert origins.normalize("t", "outer:a|1|in:b") == "outer:a|1|in:b"
    assert origins.find("t", "outer:a") is None
    assert len(table) <= 4


def test_a_new_execution_of_a_task_does_not_inherit_an_earlier_one_s_numbers() -> None:
    """The same task id comes back (a resume after an interrupt): what a retry of the
    earlier execution put back must not rename the new one's subgraphs, seen or not."""
    origins = NamespaceOrigins(OwnerTable())
    earlier, first, second = Counter(), Scratchpad(), Scratchpad()
    origins.enter("t", "outer:a", 0, ("outer", 1, ()), first, earlier)
    origins.enter("t", "outer:a", 1, ("outer", 1, ()), second, earlier)
    origins.enter("t", "outer:a", 2, ("outer", 1, ()), second, earlier)
    assert origins.normalize("t", "outer:a|2|in:b") == "outer:a|1|in:b"
    later, resumed = Counter(), Scratchpad()
    origins.enter("t", "outer:a", 0, ("outer", 1, ()), resumed, later)
    assert origins.normalize("t", "outer:a|1|in:b") == "outer:a|1|in:b"  # never entered
    origins.enter("t", "outer:a", 1, ("outer", 1, ()), resumed, later)
    assert origins.normalize("t", "outer:a|1|in:b") == "outer:a|1|in:b"
    assert origins.normalize("t", "outer:a|2|in:b") == "outer:a|2|in:b"


def test_subgraphs_of_an_attempt_entered_out_of_order_keep_their_numbers() -> None:
    origins = NamespaceOrigins(OwnerTable())
    counter, first, second = Counter(), Scratchpad(), Scratchpad()
    for level in (0, 1):
        origins.enter("t", "outer:a", level, ("outer", 1, ()), first, counter)
    origins.enter("t", "outer:a", 3, ("outer", 1, ()), second, counter)  # before 2
    origins.enter("t", "outer:a", 2, ("outer", 1, ()), second, counter)
    assert origins.normalize("t", "outer:a|3|in:b") == "outer:a|in:b"
    assert origins.normalize("t", "outer:a|2|in:b") == "outer:a|2|in:b"  # never |-1


def test_ended_executions_go_long_before_the_table_is_full() -> None:
    """An ended execution's scratchpad holds its answers and the writes loaded with its
    checkpoint; kept until 4,096 others had come, a busy server held thousands."""
    table = OwnerTable()  # the default capacity, 4,096
    counts = CallCounts(table)
    live = [Scratchpad() for _ in range(3)]
    for pad in live:
        counts.next(pad, "charge")
    for _ in range(1000):  # executions that ended: nothing holds their scratchpads
        counts.next(Scratchpad(), "charge")
    # The live ones and a few ended ones not looked at yet: not the last 1,000.
    assert len(table) <= 2 * len(live) + 2
    assert [counts.next(pad, "charge") for pad in live] == [1, 1, 1]
