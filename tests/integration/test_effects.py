"""@effect on a real database: replay, keys, retries, unknown outcomes, concurrency.

The receiver is a list of calls the test can count; crash behaviour with real processes is
in tests/crash/test_effect_crashes.py.
"""

from __future__ import annotations

import asyncio
import operator
import threading
import time
import uuid
from datetime import datetime, timedelta
from typing import Annotated, Any

import psycopg
import pytest
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, Send, interrupt
from psycopg.rows import dict_row
from psycopg_pool import ConnectionPool
from typing_extensions import TypedDict

from langgraph_durable import (
    AsyncDurablePostgresSaver,
    AsyncEffectJournal,
    DurablePostgresSaver,
    EffectDeferred,
    EffectFailedError,
    EffectInProgressError,
    EffectInputMismatchError,
    EffectJournal,
    EffectOutcomeUnknown,
    InvalidInputError,
    JournalNotFoundError,
    Reconciled,
    RetryLater,
    RetryPolicy,
    SideEffectBeforeInterruptWarning,
    current_effect_key,
    effect,
    set_default_journal,
)
from langgraph_durable.effects._keys import TaskContext


class State(TypedDict, total=False):
    log: Annotated[list[str], operator.add]
    n: int
    answer: str


@pytest.fixture
def journal(saver: DurablePostgresSaver) -> EffectJournal:
    assert isinstance(saver.conn, ConnectionPool)
    return EffectJournal(saver.conn)


def thread() -> dict[str, Any]:
    return {"configurable": {"thread_id": f"fx-{uuid.uuid4()}"}}


def test_effect_before_interrupt_runs_once_across_resume(saver: DurablePostgresSaver) -> None:
    sent: list[str] = []

    @effect
    def send_email(to: str, idempotency_key: str) -> str:
        sent.append(idempotency_key)
        return f"sent to {to}"

    def review(state: State) -> dict[str, Any]:
        receipt = send_email("ana@example.com")
        answer = interrupt({"receipt": receipt})
        return {"answer": answer, "log": [receipt]}

    builder = StateGraph(State)
    builder.add_node("review", review)
    builder.add_edge(START, "review")
    builder.add_edge("review", END)
    graph = builder.compile(checkpointer=saver)
    config = thread()
    with pytest.warns(SideEffectBeforeInterruptWarning, match="send_email"):
        graph.invoke({"log": []}, config, durability="sync")
    result = graph.invoke(Command(resume="ok"), config, durability="sync")
    assert result["answer"] == "ok"
    assert len(sent) == 1  # the node ran twice, the email went once
    assert result["log"] == ["sent to ana@example.com"]


def test_default_keys_differ_across_loops_sends_calls_and_threads(
    saver: DurablePostgresSaver,
) -> None:
    keys: list[str] = []

    @effect(name="record")
    def record(label: str) -> str:
        keys.append(current_effect_key())
        return label

    def loop(state: State) -> dict[str, Any]:
        record("same")
        record("same")  # a second call in the same node
        return {"n": state.get("n", 0) + 1}

    def fan(state: State) -> list[Send]:
        return [Send("item", {"n": i}) for i in range(2)] if state["n"] >= 2 else ["loop"]  # type: ignore[list-item]

    def item(state: State) -> dict[str, Any]:
        record("same")
        return {}

    builder = StateGraph(State)
    builder.add_node("loop", loop)
    builder.add_node("item", item)
    builder.add_edge(START, "loop")
    builder.add_conditional_edges("loop", fan, ["loop", "item"])
    builder.add_edge("item", END)
    graph = builder.compile(checkpointer=saver)
    graph.invoke({"n": 0}, thread())
    assert len(keys) == 6  # 2 loop iterations x 2 calls + 2 Send items
    assert len(set(keys)) == 6
    graph.invoke({"n": 0}, thread())
    assert len(set(keys)) == 12  # another thread, other keys


def test_default_keys_differ_across_executions_of_a_subgraph(
    saver: DurablePostgresSaver,
) -> None:
    """From inside, two `Send` items into one subgraph, or a parent loop running it again,
    look alike (the same inner node, step and path): each must still act, and a resume
    inside the subgraph must replay, not act again."""
    acted: list[str] = []

    @effect(name="subgraph.notify")
    def notify(to: str) -> str:
        acted.append(current_effect_key())
        return f"notified {to}"

    class Inner(TypedDict, total=False):
        log: Annotated[list[str], operator.add]
        answer: str

    def inner(state: Inner) -> dict[str, Any]:
        notify("ops")
        answer = interrupt("go on?") if state.get("answer") == "ask" else "no question"
        return {"log": [str(answer)]}

    sub_builder = StateGraph(Inner)
    sub_builder.add_node("notify", inner)
    sub_builder.add_edge(START, "notify")
    sub_builder.add_edge("notify", END)
    sub = sub_builder.compile()

    def loop(state: State) -> dict[str, Any]:
        return {"n": state.get("n", 0) + 1}

    def fan(state: State) -> list[Send]:
        return [Send("mailer", {"log": []}) for _ in range(2)]

    builder = StateGraph(State)
    builder.add_node("loop", loop)
    builder.add_node("mailer", sub)
    builder.add_edge(START, "loop")
    builder.add_conditional_edges("loop", fan, ["mailer"])
    builder.add_conditional_edges("mailer", lambda s: END if s["n"] >= 2 else "loop", ["loop", END])
    graph = builder.compile(checkpointer=saver)
    graph.invoke({"n": 0}, thread())
    assert len(acted) == 4  # 2 parent loop iterations x 2 Send items
    assert len(set(acted)) == 4

    asking = StateGraph(State)
    asking.add_node("mailer", sub)
    asking.add_edge(START, "mailer")
    asking.add_edge("mailer", END)
    paused = asking.compile(checkpointer=saver)
    config = thread()
    acted.clear()
    paused.invoke({"answer": "ask"}, config)
    assert paused.invoke(Command(resume="yes"), config)["log"] == ["yes"]
    assert len(acted) == 1  # the resumed subgraph replayed the key it acted under

    # Time travel to before the subgraph: LangGraph re-enters it by `list(before=...)`,
    # not `get_tuple`; its resume then must replay what the travelled run did.
    (start,) = [s for s in paused.get_state_history(config) if s.next == ("mailer",)]
    paused.invoke(None, start.config)
    assert len(acted) == 2  # a new execution at a later step: it acts again
    assert paused.invoke(Command(resume="again"), config)["log"] == ["again"]
    assert len(acted) == 2


def test_business_key_dedupes_across_threads_and_rejects_other_input(
    journal: EffectJournal,
) -> None:
    calls: list[int] = []
    order = f"order-{uuid.uuid4()}"

    @effect(key=lambda order_id, amount: f"refund:{order_id}", journal=journal)
    def refund(order_id: str, amount: int) -> dict[str, Any]:
        calls.append(amount)
        return {"refund_id": f"r-{order_id}", "amount": amount}

    first = refund(order, 420)
    assert refund(order, 420) == first
    assert calls == [420]
    with pytest.raises(EffectInputMismatchError, match="input hash") as raised:
        refund(order, 999)
    assert calls == [420]
    stored = journal.get(f"refund:{order}")
    assert stored is not None
    assert stored.input_hash in str(raised.value)  # both hashes are named


def test_outside_a_graph_needs_a_key_and_a_journal(journal: EffectJournal) -> None:
    @effect
    def keyless() -> int:
        return 1

    @effect(key="fixed-key")
    def keyed() -> int:
        return 1

    with pytest.raises(JournalNotFoundError):
        keyed()
    set_default_journal(journal)
    try:
        with pytest.raises(InvalidInputError, match="pass key="):
            keyless()
        assert keyed() == 1
    finally:
        set_default_journal(None)


def test_retryable_errors_retry_with_persisted_attempts(journal: EffectJournal) -> None:
    """Errors that prove nothing was sent are retried; timeouts are not (test_effect_outcomes)."""
    failures = [ConnectionRefusedError("down"), ConnectionRefusedError("still down")]
    key = f"flaky-{uuid.uuid4()}"

    @effect(
        key=key,
        journal=journal,
        retry=RetryPolicy(max_attempts=3, initial_delay=0.01, jitter=0),
    )
    def flaky() -> str:
        if failures:
            raise failures.pop(0)
        return "ok"

    assert flaky() == "ok"
    row = journal.get(key)
    assert row is not None
    assert (row.status, row.attempt) == ("completed", 3)


def test_validation_errors_fail_at_once_and_replay_as_failed(journal: EffectJournal) -> None:
    calls: list[int] = []
    key = f"invalid-{uuid.uuid4()}"

    @effect(key=key, journal=journal)
    def validate(amount: int) -> int:
        calls.append(amount)
        raise ValueError("amount must be positive")

    with pytest.raises(ValueError, match="positive"):
        validate(-1)
    with pytest.raises(EffectFailedError, match="ValueError: amount must be positive"):
        validate(-1)
    assert calls == [-1]


def test_a_long_rate_limit_defers_with_a_time_to_retry(db_dsn: str, journal: EffectJournal) -> None:
    calls: list[str] = []
    key = f"limited-{uuid.uuid4()}"

    @effect(key=key, journal=journal)
    def limited() -> str:
        calls.append("call")
        if len(calls) == 1:
            raise RetryLater(3600)
        return "done"

    with pytest.raises(EffectDeferred) as first:
        limited()
    retry_at = first.value.retry_at
    assert retry_at is not None
    with pytest.raises(EffectDeferred):
        limited()  # too early: nothing is called
    assert calls == ["call"]
    # An hour later (moved, not waited for): the next call attempts again.
    with psycopg.connect(db_dsn, autocommit=True) as conn:
        conn.execute(
            "UPDATE langgraph_durable_effects SET next_attempt_at = now() WHERE key = %s",
            (key,),
        )
    assert limited() == "done"
    assert calls == ["call", "call"]


@pytest.mark.parametrize("retry_after", [float("inf"), 1e12])
def test_an_endless_rate_limit_defers_for_thirty_days_at_most(
    journal: EffectJournal, retry_after: float
) -> None:
    """A retry-after of infinity (or a date taken for seconds) must not leave the key
    running, nor store a time the journal cannot read back (which broke every listing)."""
    key = f"endless-limit-{uuid.uuid4()}"

    @effect(key=key, journal=journal)
    def limited() -> str:
        raise RetryLater(retry_after)

    with pytest.raises(EffectDeferred) as deferred:
        limited()
    retry_at = deferred.value.retry_at
    assert retry_at is not None
    row = journal.get(key)
    assert row is not None
    assert row.next_attempt_at is not None
    assert timedelta(days=29) < row.next_attempt_at - row.db_now <= timedelta(days=30)
    assert key in [r["key"] for r in journal.open_effects(None, 1000)]


def test_a_short_rate_limit_is_waited_out_in_the_same_call(journal: EffectJournal) -> None:
    calls: list[str] = []
    key = f"short-limit-{uuid.uuid4()}"

    @effect(key=key, journal=journal)
    def limited() -> str:
        calls.append("call")
        if len(calls) == 1:
            raise RetryLater(0.05)  # within RetryPolicy.max_inline_wait
        return "done"

    assert limited() == "done"
    row = journal.get(key)
    assert row is not None
    assert (row.status.value, row.attempt) == ("completed", 2)


def dead_attempt(dsn: str, key: str, name: str, input_digest: str) -> None:
    """A running row whose lease ran out: an attempt that died without an outcome."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO langgraph_durable_effects (key, effect_name, input_hash, status, "
            "attempt, lease_owner, lease_expires_at) VALUES (%s, %s, %s, 'running', 1, "
            "'elsewhere:1:1', now() - interval '1 second')",
            (key, name, input_digest),
        )


def _digest(journal: EffectJournal, fn: Any) -> str:
    from langgraph_durable.effects._keys import input_hash

    return input_hash(journal.serde, fn.__effect__.name, {})


def test_unknown_outcome_stops_and_can_be_resolved_by_hand(
    db_dsn: str, journal: EffectJournal
) -> None:
    calls: list[str] = []
    key = f"unknown-{uuid.uuid4()}"

    @effect(key=key, journal=journal, name="charge")
    def charge() -> str:
        calls.append("charged")
        return "receipt"

    dead_attempt(db_dsn, key, "charge", _digest(journal, charge))
    with pytest.raises(EffectOutcomeUnknown, match="invoke\\(None, config\\)"):
        charge()
    row = journal.get(key)
    assert row is not None
    assert row.status == "unknown"
    assert calls == []
    journal.resolve(key, allow_retry=True)
    assert charge() == "receipt"
    assert calls == ["charged"]


def test_resolving_as_completed_returns_the_operator_result(
    db_dsn: str, journal: EffectJournal
) -> None:
    key = f"manual-{uuid.uuid4()}"

    @effect(key=key, journal=journal, name="manual")
    def manual() -> str:
        raise AssertionError("must not be called")

    dead_attempt(db_dsn, key, "manual", _digest(journal, manual))
    journal.resolve(key, completed="found at receiver")
    assert manual() == "found at receiver"


@pytest.mark.parametrize("found", [True, False])
def test_reconcile_hook_resolves_unknown_outcomes(
    db_dsn: str, journal: EffectJournal, found: bool
) -> None:
    calls: list[str] = []
    asked: list[str] = []
    key = f"rec-{uuid.uuid4()}"

    def ask_receiver(idempotency_key: str) -> Reconciled:
        asked.append(idempotency_key)
        return Reconciled.completed("deal-7") if found else Reconciled.absent()

    @effect(key=key, journal=journal, name="deal", reconcile=ask_receiver)
    def create_deal() -> str:
        calls.append("created")
        return "deal-8"

    dead_attempt(db_dsn, key, "deal", _digest(journal, create_deal))
    assert create_deal() == ("deal-7" if found else "deal-8")
    assert asked == [key]
    assert calls == ([] if found else ["created"])
    assert create_deal() == ("deal-7" if found else "deal-8")  # and now it replays
    assert asked == [key]


def test_idempotent_receivers_are_retried_after_an_unknown_outcome(
    db_dsn: str, journal: EffectJournal
) -> None:
    key = f"idem-{uuid.uuid4()}"

    @effect(key=key, journal=journal, name="idem", retry="idempotent")
    def send(idempotency_key: str) -> str:
        return f"sent with {idempotency_key}"

    dead_attempt(db_dsn, key, "idem", _digest(journal, send))
    assert send() == f"sent with {key}"
    row = journal.get(key)
    assert row is not None
    assert row.attempt == 2


def test_a_second_caller_waits_for_the_first(journal: EffectJournal) -> None:
    key = f"race-{uuid.uuid4()}"
    started, release = threading.Event(), threading.Event()
    calls: list[str] = []

    @effect(key=key, journal=journal)
    def slow() -> str:
        calls.append("call")
        started.set()
        release.wait(60)
        return "result"

    @effect(key=key, journal=journal, wait_timeout=0.2, name=slow.__effect__.name)  # type: ignore[attr-defined]
    def impatient() -> str:
        return "never"

    results: list[str] = []
    worker = threading.Thread(target=lambda: results.append(slow()))
    worker.start()
    assert started.wait(60)
    with pytest.raises(EffectInProgressError, match="being attempted"):
        impatient()
    # The second caller waits through the journal: release the first only once it does.
    waiting = threading.Event()
    sleep = journal.sleep

    def sleep_and_say(seconds: float) -> None:
        waiting.set()
        sleep(seconds)

    journal.sleep = sleep_and_say  # type: ignore[method-assign]
    waiter = threading.Thread(target=lambda: results.append(slow()))
    waiter.start()
    assert waiting.wait(60)
    release.set()
    worker.join(60)
    waiter.join(60)
    assert results == ["result", "result"]
    assert calls == ["call"]


def test_interrupt_inside_an_effect_is_not_a_failure(saver: DurablePostgresSaver) -> None:
    calls: list[str] = []

    @effect
    def ask_then_act() -> str:
        calls.append("attempt")
        answer = interrupt("confirm?")
        return f"acted on {answer}"

    def node(state: State) -> dict[str, Any]:
        return {"answer": ask_then_act()}

    builder = StateGraph(State)
    builder.add_node("node", node)
    builder.add_edge(START, "node")
    builder.add_edge("node", END)
    graph = builder.compile(checkpointer=saver)
    config = thread()
    graph.invoke({}, config)
    assert graph.invoke(Command(resume="yes"), config)["answer"] == "acted on yes"
    assert calls == ["attempt", "attempt"]


async def test_sync_and_async_effects_in_an_async_graph(db_dsn: str) -> None:
    sent: list[str] = []

    @effect
    def sync_send(to: str) -> str:
        sent.append(f"sync:{to}")
        return "s"

    @effect
    async def async_send(to: str) -> str:
        sent.append(f"async:{to}")
        return "a"

    def sync_node(state: State) -> dict[str, Any]:
        sync_send("x")
        answer = interrupt("go?")
        return {"answer": answer}

    async def async_node(state: State) -> dict[str, Any]:
        await async_send("y")
        answer = interrupt("go?")
        return {"log": [str(answer)]}

    builder = StateGraph(State)
    builder.add_node("sync_node", sync_node)
    builder.add_node("async_node", async_node)
    builder.add_edge(START, "sync_node")
    builder.add_edge("sync_node", "async_node")
    builder.add_edge("async_node", END)
    async with AsyncDurablePostgresSaver.from_conn_string(db_dsn) as saver:
        graph = builder.compile(checkpointer=saver)
        config = thread()
        with pytest.warns(SideEffectBeforeInterruptWarning, match="sync_send"):
            await graph.ainvoke({}, config)
        with pytest.warns(SideEffectBeforeInterruptWarning, match="async_send"):
            await graph.ainvoke(Command(resume="1"), config)
        await graph.ainvoke(Command(resume="2"), config)
    assert sent == ["sync:x", "async:y"]


def test_time_travel_acts_again_unless_a_business_key_says_otherwise(
    saver: DurablePostgresSaver,
) -> None:
    """Replaying from an earlier checkpoint is a new execution (LangGraph gives it a new
    step), so default keys differ and the effect runs again; a business key still holds."""
    sent: list[str] = []
    order = f"order-{uuid.uuid4()}"

    @effect
    def notify() -> str:
        sent.append("notify")
        return "notified"

    @effect(key=lambda: f"refund:{order}")
    def refund() -> str:
        sent.append("refund")
        return "refunded"

    builder = StateGraph(State)
    builder.add_node("first", lambda s: {"log": ["first"]})
    builder.add_node("act", lambda s: {"log": [notify(), refund()]})
    builder.add_edge(START, "first")
    builder.add_edge("first", "act")
    builder.add_edge("act", END)
    graph = builder.compile(checkpointer=saver)
    config = thread()
    graph.invoke({"log": []}, config)
    before = next(s for s in graph.get_state_history(config) if s.next == ("act",))
    replayed = graph.invoke(None, before.config)
    assert replayed["log"][-2:] == ["notified", "refunded"]
    assert sent == ["notify", "refund", "notify"]


def test_journal_rows_record_where_they_came_from(db_dsn: str, saver: Any) -> None:
    @effect(name="where")
    def where() -> str:
        return "here"

    builder = StateGraph(State)
    builder.add_node("spot", lambda s: {"answer": where()})
    builder.add_edge(START, "spot")
    builder.add_edge("spot", END)
    config = thread()
    builder.compile(checkpointer=saver).invoke({}, config)
    with psycopg.connect(db_dsn, row_factory=dict_row) as conn:
        row = conn.execute(
            "SELECT thread_id, node, status, attempt FROM langgraph_durable_effects "
            "WHERE thread_id = %s",
            (config["configurable"]["thread_id"],),
        ).fetchone()
    assert row == {
        "thread_id": config["configurable"]["thread_id"],
        "node": "spot",
        "status": "completed",
        "attempt": 1,
    }


def test_effects_in_tasks_tools_and_as_whole_nodes(saver: DurablePostgresSaver) -> None:
    """@effect works inside @task functions and tools, and can wrap a node itself."""
    from langchain_core.messages import AIMessage
    from langchain_core.tools import tool
    from langgraph.func import entrypoint, task
    from langgraph.graph import MessagesState
    from langgraph.prebuilt import ToolNode

    seen: list[str] = []

    @effect
    def post(channel: str) -> str:
        seen.append(channel)
        return f"posted to {channel}"

    @task
    def announce(channel: str) -> str:
        return post(channel)

    @entrypoint(checkpointer=saver)
    def workflow(channel: str) -> str:
        result = announce(channel).result()
        interrupt("done?")
        return result

    config = thread()
    workflow.invoke("#ops", config)
    assert workflow.invoke(Command(resume=True), config) == "posted to #ops"

    @tool
    def notify_team(team: str) -> str:
        """Tell a team."""
        return post(team)

    call = AIMessage(
        "", tool_calls=[{"name": "notify_team", "args": {"team": "#sales"}, "id": "1"}]
    )
    tools = StateGraph(MessagesState)
    tools.add_node("tools", ToolNode([notify_team]))
    tools.add_edge(START, "tools")
    tools.add_edge("tools", END)
    tool_graph = tools.compile(checkpointer=saver)
    tool_graph.invoke({"messages": [call]}, thread())

    @effect(name="whole-node")
    def whole_node(state: State) -> dict[str, Any]:
        seen.append("whole-node")
        return {"answer": "done"}

    def gate(state: State) -> dict[str, Any]:
        return {"n": 1, "answer": interrupt("go?")}

    wrapped = StateGraph(State)
    wrapped.add_node("act", whole_node)
    wrapped.add_node("gate", gate)
    wrapped.add_edge(START, "act")
    wrapped.add_edge("act", "gate")
    wrapped.add_edge("gate", END)
    node_graph = wrapped.compile(checkpointer=saver)
    config = thread()
    node_graph.invoke({"log": []}, config)
    node_graph.invoke(Command(resume="x"), config)
    assert seen == ["#ops", "#sales", "whole-node"]


def lease_of(dsn: str, key: str) -> datetime | None:
    with psycopg.connect(dsn) as conn:
        row = conn.execute(
            "SELECT lease_expires_at FROM langgraph_durable_effects WHERE key = %s", (key,)
        ).fetchone()
    return None if row is None else row[0]


def wait_for_lease_moves(dsn: str, key: str, times: int) -> None:
    """Block until the lease of `key` has been moved forward `times` times (heartbeats)."""
    seen: list[datetime] = []
    deadline = time.monotonic() + 60  # only a guard against a hang
    while len(seen) <= times:
        assert time.monotonic() < deadline, f"lease moved {len(seen) - 1} times, not {times}"
        found = lease_of(dsn, key)
        if found is not None and (not seen or found > seen[-1]):
            seen.append(found)
        time.sleep(0.01)


def test_heartbeat_keeps_a_long_attempt_alive(db_dsn: str, journal: EffectJournal) -> None:
    """A call longer than its lease keeps it: the heartbeat moves it on, again and again."""
    key = f"long-{uuid.uuid4()}"
    release = threading.Event()
    calls: list[str] = []

    @effect(key=key, journal=journal, lease_ttl=0.6, wait_timeout=60, name="long")
    def long_call() -> str:
        calls.append("call")
        release.wait(60)
        return "finished"

    results: list[str] = []
    worker = threading.Thread(target=lambda: results.append(long_call()))
    worker.start()
    try:
        wait_for_lease_moves(db_dsn, key, times=3)  # beyond three leases of 0.6 s
    finally:
        release.set()
        worker.join(60)
    assert long_call() == "finished"  # replayed
    assert results == ["finished"]
    assert calls == ["call"]
    row = journal.get(key)
    assert row is not None
    assert row.lease_expires_at is None  # completed: the heartbeat stopped with the call


async def test_async_heartbeat_keeps_a_long_attempt_alive(db_dsn: str) -> None:
    """The async flavour: a `call_later` timer on the loop extends the lease."""
    key = f"long-async-{uuid.uuid4()}"
    calls: list[str] = []
    release = asyncio.Event()
    async with AsyncDurablePostgresSaver.from_conn_string(db_dsn) as saver:
        await saver.setup()
        journal = AsyncEffectJournal(saver.conn)  # type: ignore[arg-type]

        @effect(key=key, journal=journal, lease_ttl=0.6, wait_timeout=60, name="long")
        async def long_call() -> str:
            calls.append("call")
            await release.wait()
            return "finished"

        first = asyncio.create_task(long_call())
        try:
            await asyncio.to_thread(wait_for_lease_moves, db_dsn, key, 3)
        finally:
            release.set()
        assert await first == "finished"
        assert await long_call() == "finished"  # replayed
    assert calls == ["call"]


def test_claims_and_takeovers_under_a_lost_thread_lease_change_nothing(
    journal: EffectJournal, db_dsn: str
) -> None:
    """A call under a thread lease (a worker's run) carries its fencing token; once the
    thread has moved on to another token, neither a first attempt nor a next one starts,
    and the journal says the lease is gone."""
    thread_id = f"fx-{uuid.uuid4()}"
    with psycopg.connect(db_dsn, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO langgraph_durable_threads (thread_id, fencing_token) VALUES (%s, 5)",
            (thread_id,),
        )

    def where(token: int | None) -> TaskContext:
        return TaskContext(thread_id, "", "node", 1, "[]", None, None, fence_token=token)

    stale, current = where(4), where(5)
    key = f"fenced-{uuid.uuid4()}"
    assert journal.claim(key, "mail", "h", 30.0, stale) is None
    assert journal.get(key) is None
    assert not journal.lease_held(stale)
    assert journal.lease_held(current)
    assert journal.lease_held(where(None))
    assert journal.claim(key, "mail", "h", 30.0, current) == 1
    assert journal.mark_unknown(key, 1)
    row = journal.get(key)
    assert row is not None
    assert journal.take_over(key, 1, row.status, 30.0, where=stale) is None
    assert journal.take_over(key, 1, row.status, 30.0, where=current) == 2
