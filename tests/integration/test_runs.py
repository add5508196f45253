"""Runs on a real database: the registry, a worker, strategies, waits, versions, fencing.

Each test gives its graphs a name of its own, so workers of different tests never take
each other's runs. Time-based states (a retry time, a stalled run) are reached by moving
times in the database, never by sleeping.
"""

from __future__ import annotations

import asyncio
import logging
import math
import operator
import threading
import time
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from typing import Annotated, Any

import psycopg
import pytest
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt
from psycopg.rows import dict_row
from typing_extensions import TypedDict
from worker_clock import skew_worker_clock

from langgraph_durable import (
    ConfigurationError,
    DurablePostgresSaver,
    EffectJournal,
    FencedOutError,
    GraphVersion,
    InvalidInputError,
    RetryLater,
    Run,
    RunConflictError,
    RunNotFoundError,
    RunRegistry,
    RunStatus,
    ThreadBusyError,
    Worker,
    WrongArgumentTypeError,
    adurable_sleep,
    durable_sleep,
    durable_sleep_until,
    effect,
)
from langgraph_durable._db import Heartbeat
from langgraph_durable._langgraph import CONFIG_KEY_RUNTIME
from langgraph_durable.approvals import pending_approvals
from langgraph_durable.checkpoint import put_writes_txn
from langgraph_durable.cli import main
from langgraph_durable.cli._commands import EXIT_RUN_FAILED, EXIT_STILL_RUNNING
from langgraph_durable.runs import _worker as worker_module

HANG_GUARD_S = 120


class State(TypedDict, total=False):
    log: Annotated[list[str], operator.add]
    answer: Any


def graph_of(
    saver: DurablePostgresSaver,
    *nodes: tuple[str, Callable[[State], Any]],
    name: str | None = None,
    version: str = "1",
    **options: Any,
) -> GraphVersion:
    builder = StateGraph(State)
    previous = START
    for node, fn in nodes:
        builder.add_node(node, fn)
        builder.add_edge(previous, node)
        previous = node
    builder.add_edge(previous, END)
    return GraphVersion(
        name or f"g-{uuid.uuid4().hex[:8]}",
        version,
        builder.compile(checkpointer=saver),
        **options,
    )


def step(name: str) -> tuple[str, Callable[[State], Any]]:
    return name, lambda s: {"log": [name]}


def sql(dsn: str, statement: str, *params: Any) -> list[tuple[Any, ...]]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        cur = conn.execute(statement, params)
        return cur.fetchall() if cur.description else []


def expire_thread_lease(dsn: str, thread: str) -> None:
    """The thread's holder stalls past its lease (moved in the database): another may take it."""
    sql(
        dsn,
        "UPDATE langgraph_durable_threads SET lease_expires_at = now() - interval '1s' "
        "WHERE thread_id = %s",
        thread,
    )


def make_due(dsn: str, run_id: str) -> None:
    """The run's retry time has come (moved in the database, not waited for)."""
    sql(dsn, "UPDATE langgraph_durable_runs SET retry_at = now() WHERE run_id = %s", run_id)


def test_a_run_is_taken_run_and_its_output_kept(
    saver: DurablePostgresSaver, runs: RunRegistry
) -> None:
    graph = graph_of(saver, step("a"), step("b"))
    run = runs.create(graph, {"log": []})
    assert run.status is RunStatus.PENDING
    (done,) = Worker(saver, [graph]).run_until_idle()
    assert (done.run_id, done.status, done.attempt) == (run.run_id, RunStatus.SUCCESS, 1)
    assert runs.output_of(done) == {"log": ["a", "b"]}
    assert runs.wait_for(run.run_id).status is RunStatus.SUCCESS
    assert done.finished_at is not None
    assert done.agent_server_status == "success"


def test_an_interrupted_run_is_resumed_with_a_command(
    saver: DurablePostgresSaver, runs: RunRegistry
) -> None:
    graph = graph_of(saver, step("a"), ("ask", lambda s: {"answer": interrupt("ok?")}))
    worker = Worker(saver, [graph])
    run = runs.create(graph, {"log": []})
    (waiting,) = worker.run_until_idle()
    assert waiting.status is RunStatus.INTERRUPTED
    assert runs.wait_for(run.run_id).status is RunStatus.INTERRUPTED
    runs.resume(run.run_id, Command(resume="yes"))
    (done,) = worker.run_until_idle()
    assert done.status is RunStatus.SUCCESS
    assert runs.output_of(done) == {"log": ["a"], "answer": "yes"}
    with pytest.raises(RunConflictError, match="is success"):
        runs.resume(run.run_id, Command(resume="again"))


def test_an_answer_to_a_question_the_run_no_longer_waits_on_is_refused(
    saver: DurablePostgresSaver, runs: RunRegistry
) -> None:
    """An answer read off a list of questions (the console, `approve` without --graph)
    was queued for whatever the run waited on when it arrived: if another answer got
    there first and the run went on to its next question, this answer went to that one
    (an approval of a $50 gift card approved a wire transfer)."""
    graph = graph_of(
        saver,
        ("gift", lambda s: {"log": [f"gift {interrupt('gift?')}"]}),
        ("wire", lambda s: {"log": [f"wire {interrupt('wire?')}"]}),
    )
    worker = Worker(saver, [graph])
    run = runs.create(graph, {"log": []})
    worker.run_until_idle()
    (gift,) = pending_approvals(saver, thread_id=run.thread_id, only_approvals=False)
    runs.resume(run.run_id, Command(resume="yes"), question=gift.interrupt_id)  # ana's
    read_before = runs.get(run.run_id)  # what bob's call read, before the thread's lock
    assert read_before.status is RunStatus.PENDING
    worker.run_until_idle()

    class ReadBeforeTheWorker(RunRegistry):
        def get(self, run_id: str) -> Run:
            return read_before

    with pytest.raises(RunConflictError, match="no longer waits on question"):
        ReadBeforeTheWorker(saver).resume(
            run.run_id, Command(resume="ok for the gift"), question=gift.interrupt_id
        )
    (wire,) = pending_approvals(saver, thread_id=run.thread_id, only_approvals=False)
    with pytest.raises(RunConflictError, match="no longer waits on question"):
        runs.resume(run.run_id, Command(resume="ok for the gift"), question=gift.interrupt_id)
    assert runs.get(run.run_id).status is RunStatus.INTERRUPTED  # nothing was queued
    runs.resume(run.run_id, Command(resume="no"), question=wire.interrupt_id)
    (done,) = worker.run_until_idle()
    assert runs.output_of(done) == {"log": ["gift yes", "wire no"]}


def test_runs_of_a_thread_go_one_at_a_time_in_order(
    saver: DurablePostgresSaver, runs: RunRegistry
) -> None:
    graph = graph_of(saver, ("add", lambda s: {"log": [f"turn {len(s.get('log', []))}"]}))
    thread = f"t-{uuid.uuid4()}"
    first = runs.create(graph, {"log": []}, thread_id=thread)
    second = runs.create(graph, {}, thread_id=thread)  # enqueue, the default
    done = Worker(saver, [graph]).run_until_idle()
    assert [r.run_id for r in done] == [first.run_id, second.run_id]
    assert runs.output_of(done[-1]) == {"log": ["turn 0", "turn 1"]}


def test_reject_refuses_a_second_run_on_a_busy_thread(
    saver: DurablePostgresSaver, runs: RunRegistry
) -> None:
    graph = graph_of(saver, step("a"))
    thread = f"t-{uuid.uuid4()}"
    runs.create(graph, {"log": []}, thread_id=thread)
    with pytest.raises(RunConflictError, match="already has an active run"):
        runs.create(graph, {"log": []}, thread_id=thread, multitask_strategy="reject")
    assert len(runs.list(thread_id=thread)) == 1


@pytest.mark.parametrize("strategy", ["interrupt", "rollback"])
def test_interrupt_and_rollback_stop_the_active_run(
    saver: DurablePostgresSaver, runs: RunRegistry, db_dsn: str, strategy: str
) -> None:
    graph = graph_of(saver, step("a"), ("ask", lambda s: {"answer": interrupt("?")}))
    thread = f"t-{uuid.uuid4()}"
    worker = Worker(saver, [graph])
    first = runs.create(graph, {"log": []}, thread_id=thread)
    worker.run_until_idle()
    runs.resume(first.run_id, Command(resume="later"))  # active again, not yet taken
    second = runs.create(graph, {"log": []}, thread_id=thread, multitask_strategy=strategy)
    stopped = runs.get(first.run_id)
    expected = RunStatus.INTERRUPTED if strategy == "interrupt" else RunStatus.CANCELLED
    assert stopped.status is expected
    assert stopped.status_reason == f"{strategy}: superseded by run {second.run_id}"
    kept = sql(
        db_dsn,
        "SELECT count(*) FROM checkpoints WHERE metadata ->> 'run_id' = %s",
        first.run_id,
    )[0][0]
    assert (kept > 0) is (strategy == "interrupt")
    # Interrupted, but at no question anyone can answer: `runs wait` does not report it as
    # waiting (exit 0) but as ended without success.
    assert stopped.superseded is (strategy == "interrupt")
    (done,) = worker.run_until_idle()
    assert done.run_id == second.run_id
    # The thread went on with the newer run: the older one waits at no question anyone
    # can answer, and `runs wait` does not report it as waiting (exit 0).
    assert not runs.waits_for_answer(first.run_id)
    wait = ["runs", "wait", first.run_id, "--timeout", "5", "--json", "--dsn", db_dsn]
    assert main(wait) == EXIT_RUN_FAILED


def test_an_interrupted_run_whose_thread_went_on_is_not_stuck(
    saver: DurablePostgresSaver, runs: RunRegistry, db_dsn: str
) -> None:
    """A newer run took its thread on (here enqueued after it, which starts at once: a
    waiting run is not active): its question is asked no more, so it is not waiting for a
    person, however old. It was flagged as stuck, and listed by `stuck` and `doctor`, for
    good, as nothing can end an interrupted run."""
    graph = graph_of(
        saver,
        ("ask", lambda s: {"answer": interrupt("?")}),
        waiting_stuck_after=timedelta(minutes=5),
    )
    worker = Worker(saver, [graph])
    thread = f"t-{uuid.uuid4()}"

    def age(run_id: str) -> None:
        sql(
            db_dsn,
            "UPDATE langgraph_durable_runs SET updated_at = now() - interval '6 minutes', "
            "stuck_since = NULL WHERE run_id = %s",
            run_id,
        )

    left = runs.create(graph, {"log": []}, thread_id=thread)
    worker.run_until_idle()
    age(left.run_id)
    worker.run_until_idle()  # sweeps: waiting too long
    assert left.run_id in [r.run_id for r in runs.stuck()]
    assert runs.waits_for_answer(left.run_id)
    newer = runs.create(graph, {"log": []}, thread_id=thread)
    (waiting,) = worker.run_until_idle()
    assert (waiting.run_id, waiting.status) == (newer.run_id, RunStatus.INTERRUPTED)
    assert left.run_id not in [r.run_id for r in runs.stuck()]
    # Its thread went on: `runs wait` no longer exits 0 for it, as for one that waits.
    assert not runs.waits_for_answer(left.run_id)
    assert runs.waits_for_answer(newer.run_id)
    for run_id, code in ((left.run_id, EXIT_RUN_FAILED), (newer.run_id, 0)):
        assert main(["runs", "wait", run_id, "--timeout", "5", "--json", "--dsn", db_dsn]) == code
    age(left.run_id)
    age(newer.run_id)
    worker.run_until_idle()  # sweeps again: only the newer one waits for a person
    stuck = [r.run_id for r in runs.stuck()]
    assert newer.run_id in stuck
    assert left.run_id not in stuck
    assert runs.get(left.run_id).stuck_since is None


def test_runs_wait_does_not_fail_a_run_answered_between_its_two_reads(
    saver: DurablePostgresSaver,
    runs: RunRegistry,
    db_dsn: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`runs wait` reads the run, then the question it waits at: two reads. A run someone
    answered in between (queued again: no question now) exited 3, as a run that waits
    for nobody, though it went on as it should."""
    graph = graph_of(saver, ("ask", lambda s: {"answer": interrupt("?")}))
    run = runs.create(graph, {"log": []})
    Worker(saver, [graph]).run_until_idle()
    looks = RunRegistry.waits_for_answer

    def answered_meanwhile(self: RunRegistry, run_id: str) -> bool:
        monkeypatch.setattr(RunRegistry, "waits_for_answer", looks)
        runs.resume(run_id, Command(resume="yes"))  # someone answers between the reads
        return looks(self, run_id)

    monkeypatch.setattr(RunRegistry, "waits_for_answer", answered_meanwhile)
    wait = ["runs", "wait", run.run_id, "--timeout", "0", "--json", "--dsn", db_dsn]
    assert main(wait) == EXIT_STILL_RUNNING  # queued again, not ended without success
    assert runs.get(run.run_id).status is RunStatus.PENDING


@pytest.mark.parametrize("amount", ["6", "5"])
def test_a_rolled_back_runs_effects_do_not_answer_for_the_next_run(
    saver: DurablePostgresSaver, runs: RunRegistry, db_dsn: str, amount: str
) -> None:
    """Rollback deletes the run's checkpoints, so the next run goes through the same steps
    with the same default effect keys: it found the old run's journal rows and refused
    another amount as a mismatch, for good, or replayed the old charge for its own."""
    charged: list[str] = []

    @effect(name="charge")
    def charge(amount: str) -> str:
        charged.append(amount)
        return f"charged {amount}"

    graph = graph_of(
        saver,
        ("pay", lambda s: {"answer": charge(s["log"][-1])}),
        ("ask", lambda s: {"log": [interrupt("?")]}),
    )
    thread = f"t-{uuid.uuid4()}"
    worker = Worker(saver, [graph])
    first = runs.create(graph, {"log": ["5"]}, thread_id=thread)
    worker.run_until_idle()
    runs.resume(first.run_id, Command(resume="later"))  # active again, not yet taken
    second = runs.create(graph, {"log": [amount]}, thread_id=thread, multitask_strategy="rollback")
    (done,) = worker.run_until_idle()
    assert (done.run_id, done.status) == (second.run_id, RunStatus.INTERRUPTED)
    assert charged == ["5", amount]
    assert saver.get_tuple({"configurable": {"thread_id": thread}}) is not None
    keys = sql(
        db_dsn, "SELECT count(*) FROM langgraph_durable_effects WHERE thread_id = %s", thread
    )
    assert keys == [(1,)]
    # Retried, the rolled-back run would start over with its journal rows gone: act again.
    with pytest.raises(RunConflictError, match="was rolled back"):
        runs.retry(first.run_id)
    assert charged == ["5", amount]


def test_a_run_whose_thread_went_on_is_not_retried(
    saver: DurablePostgresSaver, runs: RunRegistry
) -> None:
    """Retried, it went on from the newer run's checkpoints: it ended `success` with that
    run's output, though none of its own nodes ran."""
    graph = graph_of(saver, step("a"), step("b"))
    worker = Worker(saver, [graph])
    thread = f"t-{uuid.uuid4()}"
    stopped = runs.cancel(runs.create(graph, {"log": ["first"]}, thread_id=thread).run_id)
    newer = runs.create(graph, {"log": ["second"]}, thread_id=thread)
    (done,) = worker.run_until_idle()
    assert (done.run_id, done.status) == (newer.run_id, RunStatus.SUCCESS)
    with pytest.raises(RunConflictError, match=f"went on with run '{newer.run_id}'"):
        runs.retry(stopped.run_id)
    assert runs.get(stopped.run_id).status is RunStatus.CANCELLED
    assert worker.run_until_idle() == []


def test_runs_a_newer_run_stopped_still_count_as_not_gone_on(
    saver: DurablePostgresSaver, runs: RunRegistry, db_dsn: str
) -> None:
    """A newer run that was rolled back left the thread where it was (its checkpoints are
    gone): the older run may still be retried. A run stopped by a newer run's "interrupt"
    strategy waits for nobody, even when that newer run never started: never stuck."""

    def work(state: State) -> State:
        if state["log"][-1:] == ["fail"]:
            raise ValueError("fails")
        if state["log"][-1:] == ["sleep"]:
            durable_sleep(timedelta(days=3))
        return {"log": ["worked"]}

    graph = graph_of(saver, ("work", work), waiting_stuck_after=timedelta(minutes=5))
    worker = Worker(saver, [graph])
    thread = f"t-{uuid.uuid4()}"
    failed = runs.create(graph, {"log": ["fail"]}, thread_id=thread, max_attempts=1)
    (done,) = worker.run_until_idle()
    assert (done.run_id, done.status) == (failed.run_id, RunStatus.ERROR)
    sleeping = runs.create(graph, {"log": ["sleep"]}, thread_id=thread)
    (slept,) = worker.run_until_idle()
    assert (slept.run_id, slept.status) == (sleeping.run_id, RunStatus.DEFERRED)
    undoing = runs.create(graph, {"log": []}, thread_id=thread, multitask_strategy="rollback")
    runs.cancel(undoing.run_id)
    assert runs.retry(failed.run_id).status is RunStatus.PENDING
    # The rolled-back one would start over, its journal rows gone: refused, though the
    # run that rolled it back never started.
    with pytest.raises(RunConflictError, match="was rolled back"):
        runs.retry(sleeping.run_id)
    runs.cancel(failed.run_id)

    other = f"t-{uuid.uuid4()}"
    stopped = runs.create(graph, {"log": ["sleep"]}, thread_id=other)
    worker.run_until_idle()
    superseding = runs.create(graph, {"log": []}, thread_id=other, multitask_strategy="interrupt")
    runs.cancel(superseding.run_id)
    assert runs.get(stopped.run_id).superseded
    sql(
        db_dsn,
        "UPDATE langgraph_durable_runs SET updated_at = now() - interval '6 minutes' "
        "WHERE run_id = %s",
        stopped.run_id,
    )
    worker.run_until_idle()  # sweeps
    assert runs.get(stopped.run_id).stuck_since is None


def test_a_failing_run_is_retried_then_ends_as_error(
    saver: DurablePostgresSaver, runs: RunRegistry, db_dsn: str
) -> None:
    failures: list[int] = []

    def flaky(state: State) -> State:
        failures.append(1)
        raise ValueError(f"failure {len(failures)}")

    graph = graph_of(saver, ("flaky", flaky))
    worker = Worker(saver, [graph])
    run = runs.create(graph, {"log": []}, max_attempts=2)
    (first,) = worker.run_until_idle()
    assert (first.status, first.error_type, first.attempt) == (RunStatus.PENDING, "ValueError", 1)
    assert first.retry_at is not None
    # Its backoff is about a second: held an hour away in the database, so that a slow
    # machine cannot make it due before the next look.
    sql(
        db_dsn,
        "UPDATE langgraph_durable_runs SET retry_at = now() + interval '1 hour' WHERE run_id = %s",
        run.run_id,
    )
    assert worker.run_until_idle() == []  # not due yet
    make_due(db_dsn, run.run_id)
    (last,) = worker.run_until_idle()
    assert (last.status, last.error_message, last.attempt) == (RunStatus.ERROR, "failure 2", 2)
    retried = runs.retry(run.run_id)
    assert (retried.status, retried.attempt) == (RunStatus.PENDING, 0)


def test_a_rate_limited_effect_defers_the_run_until_due(
    saver: DurablePostgresSaver, runs: RunRegistry, db_dsn: str
) -> None:
    calls: list[str] = []

    @effect(name=f"limited-{uuid.uuid4().hex[:6]}")
    def call_api() -> str:
        calls.append("call")
        if len(calls) == 1:
            raise RetryLater(3600)
        return "ok"

    graph = graph_of(saver, ("api", lambda s: {"answer": call_api()}))
    worker = Worker(saver, [graph])
    run = runs.create(graph, {"log": []})
    (deferred,) = worker.run_until_idle()
    assert deferred.status is RunStatus.DEFERRED
    assert deferred.retry_at is not None
    assert deferred.agent_server_status == "pending"
    assert worker.run_until_idle() == []  # not before its time
    sql(
        db_dsn,
        "UPDATE langgraph_durable_effects SET next_attempt_at = now() WHERE status = 'deferred'"
        " AND thread_id = %s",
        run.thread_id,
    )
    make_due(db_dsn, run.run_id)
    (done,) = worker.run_until_idle()
    assert done.status is RunStatus.SUCCESS
    assert calls == ["call", "call"]


def test_durable_sleep_parks_the_run_and_wakes_it_when_due(
    saver: DurablePostgresSaver, runs: RunRegistry, db_dsn: str
) -> None:
    ran: list[str] = []

    def remind(state: State) -> State:
        durable_sleep(timedelta(days=3))
        ran.append("reminder")
        return {"log": ["reminded"]}

    graph = graph_of(saver, step("order"), ("remind", remind))
    worker = Worker(saver, [graph])
    run = runs.create(graph, {"log": []})
    (sleeping,) = worker.run_until_idle()
    assert sleeping.status is RunStatus.DEFERRED
    assert sleeping.retry_at is not None
    assert sleeping.retry_at - sleeping.updated_at > timedelta(days=2, hours=23)  # type: ignore[operator]
    assert worker.run_until_idle() == []
    # Three days pass: the journaled wake-up time and the run's retry time both come due.
    wake_up(saver, db_dsn, run)
    (done,) = worker.run_until_idle()
    assert done.status is RunStatus.SUCCESS, done.error_message
    assert ran == ["reminder"]
    assert runs.output_of(done) == {"log": ["order", "reminded"]}


def test_durable_sleep_until_parks_the_run_until_that_moment(
    saver: DurablePostgresSaver, runs: RunRegistry
) -> None:
    due = datetime.now(timezone.utc) + timedelta(days=2)
    graph = graph_of(saver, ("remind", lambda s: (durable_sleep_until(due), {"log": ["woke"]})[1]))
    runs.create(graph, {"log": []})
    (sleeping,) = Worker(saver, [graph]).run_until_idle()
    assert sleeping.status is RunStatus.DEFERRED
    assert sleeping.retry_at is not None
    assert abs((sleeping.retry_at - due).total_seconds()) < 60  # the clock's read, not a wait
    with pytest.raises(InvalidInputError, match="time zone"):
        durable_sleep_until(datetime.now())  # naive: names no moment
    with pytest.raises(InvalidInputError, match="datetime"):
        durable_sleep_until(3600)  # type: ignore[arg-type]


def test_a_run_asleep_across_the_upgrade_wakes_at_its_journaled_time(
    saver: DurablePostgresSaver, runs: RunRegistry, db_dsn: str
) -> None:
    """Earlier versions journaled the delay as the sleep's input: resumed by this version
    (whose call has none), the run must neither fail with EffectInputMismatchError, for
    good, nor sleep again: it wakes at the time journaled."""
    graph = graph_of(saver, ("remind", lambda s: (durable_sleep(3600), {"log": ["woke"]})[1]))
    worker = Worker(saver, [graph])
    run = runs.create(graph, {"log": []})
    (sleeping,) = worker.run_until_idle()
    assert sleeping.status is RunStatus.DEFERRED
    woken = saver.serde.dumps_typed((datetime.now(timezone.utc) - timedelta(seconds=1)).isoformat())
    sql(  # as an earlier version journaled it: the delay in the input hash; now due
        db_dsn,
        "UPDATE langgraph_durable_effects SET input_hash = 'hash-with-the-delay',"
        " result_type = %s, result = %s"
        " WHERE thread_id = %s AND effect_name = 'langgraph_durable.durable_sleep'",
        *woken,
        run.thread_id,
    )
    make_due(db_dsn, run.run_id)
    (done,) = worker.run_until_idle()
    assert done.status is RunStatus.SUCCESS, done.error_message
    assert runs.output_of(done) == {"log": ["woke"]}


def test_durable_sleep_keeps_the_first_wake_up_time_whatever_later_calls_pass(
    saver: DurablePostgresSaver, runs: RunRegistry, db_dsn: str
) -> None:
    """`durable_sleep(due - now())` passes another delay on every resume (the node re-runs
    from its first line); as the effect's input, it failed the run with
    EffectInputMismatchError. The first call's wake-up time wins; a delay at or below zero
    (the due time has passed) is taken too."""
    delays = [timedelta(days=3), timedelta(days=1), -5.0]
    passed: list[Any] = []

    def remind(state: State) -> State:
        passed.append(delays[len(passed)])
        durable_sleep(passed[-1])
        return {"log": ["reminded"]}

    graph = graph_of(saver, ("remind", remind))
    worker = Worker(saver, [graph])
    run = runs.create(graph, {"log": []}, max_attempts=1)
    (first,) = worker.run_until_idle()
    assert first.status is RunStatus.DEFERRED
    make_due(db_dsn, run.run_id)  # woken early: the first wake-up time still holds
    (again,) = worker.run_until_idle()
    assert (again.status, again.status_reason) == (RunStatus.DEFERRED, first.status_reason)
    assert again.retry_at - first.retry_at < timedelta(minutes=1)  # type: ignore[operator]
    wake_up(saver, db_dsn, run)
    (done,) = worker.run_until_idle()
    assert (done.status, done.error_message) == (RunStatus.SUCCESS, None)
    assert passed == delays


def db_now(dsn: str) -> datetime:
    """The database's clock, by which runs and sleeps are timed."""
    ((now,),) = sql(dsn, "SELECT clock_timestamp()")
    assert isinstance(now, datetime)
    return now


def journaled_wake(saver: DurablePostgresSaver, dsn: str, thread_id: str) -> datetime:
    """The wake-up time the thread's `durable_sleep` journaled."""
    ((result_type, result),) = sql(
        dsn,
        "SELECT result_type, result FROM langgraph_durable_effects "
        "WHERE thread_id = %s AND effect_name = 'langgraph_durable.durable_sleep'",
        thread_id,
    )
    return datetime.fromisoformat(saver.serde.loads_typed((result_type, result)))


def wake_up(saver: DurablePostgresSaver, dsn: str, run: Any) -> None:
    """The sleep's time has come by the database's clock (moved there, not waited for)."""
    woken = saver.serde.dumps_typed((db_now(dsn) - timedelta(seconds=1)).isoformat())
    sql(
        dsn,
        "UPDATE langgraph_durable_effects SET result_type = %s, result = %s "
        "WHERE thread_id = %s AND effect_name = 'langgraph_durable.durable_sleep'",
        *woken,
        run.thread_id,
    )
    make_due(dsn, run.run_id)


@pytest.mark.parametrize("short", ["reminder", "followup"])
def test_parallel_sleeps_park_the_run_until_the_earliest_wake_up(
    saver: DurablePostgresSaver, runs: RunRegistry, db_dsn: str, short: str
) -> None:
    """Two branches sleep side by side; LangGraph lets one of their deferrals out, and the
    run was parked until that one's time: the short sleep woke an hour late."""
    builder = StateGraph(State)
    for name in ("reminder", "followup"):
        seconds = 60 if name == short else 3600
        builder.add_node(name, lambda s, n=seconds: (durable_sleep(n), {"log": [str(n)]})[1])
        builder.add_edge(START, name)
        builder.add_edge(name, END)
    graph = GraphVersion(f"g-{uuid.uuid4().hex[:8]}", "1", builder.compile(checkpointer=saver))
    run = runs.create(graph, {"log": []})
    (sleeping,) = Worker(saver, [graph]).run_until_idle()
    assert sleeping.status is RunStatus.DEFERRED
    wakes = [
        datetime.fromisoformat(saver.serde.loads_typed((result_type, result)))
        for result_type, result in sql(
            db_dsn,
            "SELECT result_type, result FROM langgraph_durable_effects WHERE thread_id = %s "
            "AND effect_name = 'langgraph_durable.durable_sleep'",
            run.thread_id,
        )
    ]
    assert len(wakes) == 2
    assert sleeping.retry_at == min(wakes)


def test_a_worker_whose_clock_runs_ahead_does_not_wake_a_sleep_early(
    saver: DurablePostgresSaver,
    runs: RunRegistry,
    db_dsn: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The wake-up time is compared with the database's clock: on its own clock, a worker
    a day ahead found the hour another worker journaled over at once."""
    graph = graph_of(saver, ("remind", lambda s: (durable_sleep(3600), {"log": ["woke"]})[1]))
    worker = Worker(saver, [graph])
    run = runs.create(graph, {"log": []})
    (sleeping,) = worker.run_until_idle(max_runs=1)
    assert sleeping.status is RunStatus.DEFERRED
    skew_worker_clock(monkeypatch, timedelta(days=1))  # the next worker's clock is ahead
    make_due(db_dsn, run.run_id)  # and takes the run before its time
    (again,) = worker.run_until_idle(max_runs=1)
    assert again.status is RunStatus.DEFERRED, runs.output_of(again)  # still asleep
    assert again.retry_at == journaled_wake(saver, db_dsn, run.thread_id)  # not due at once
    wake_up(saver, db_dsn, run)
    (done,) = worker.run_until_idle(max_runs=1)
    assert (done.status, runs.output_of(done)) == (RunStatus.SUCCESS, {"log": ["woke"]})


def test_a_worker_whose_clock_runs_behind_wakes_a_sleep_when_due(
    saver: DurablePostgresSaver,
    runs: RunRegistry,
    db_dsn: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The wake-up time is the database's now plus the delay, and due by the database's
    clock (the registry's) the run wakes: on its own clock, a worker a day behind
    journaled the hour a day early, and then, due, deferred the run again."""
    graph = graph_of(saver, ("remind", lambda s: (durable_sleep(3600), {"log": ["woke"]})[1]))
    worker = Worker(saver, [graph])
    run = runs.create(graph, {"log": []})
    skew_worker_clock(monkeypatch, -timedelta(days=1))
    before = db_now(db_dsn)
    (sleeping,) = worker.run_until_idle(max_runs=1)
    after = db_now(db_dsn)
    assert sleeping.status is RunStatus.DEFERRED
    wake = journaled_wake(saver, db_dsn, run.thread_id)
    assert before <= wake - timedelta(hours=1) <= after
    assert sleeping.retry_at == wake  # not a day late
    wake_up(saver, db_dsn, run)
    (done,) = worker.run_until_idle(max_runs=1)
    assert (done.status, done.status_reason) == (RunStatus.SUCCESS, None)


def test_durable_sleep_until_sleeps_until_that_moment_whatever_the_workers_clock(
    saver: DurablePostgresSaver,
    runs: RunRegistry,
    db_dsn: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The time left is counted on the database's clock: a worker a day ahead took a
    moment two hours away for a past one and did not wait."""
    due = db_now(db_dsn) + timedelta(hours=2)
    graph = graph_of(saver, ("remind", lambda s: (durable_sleep_until(due), {"log": ["woke"]})[1]))
    worker = Worker(saver, [graph])
    run = runs.create(graph, {"log": []})
    skew_worker_clock(monkeypatch, timedelta(days=1))
    (sleeping,) = worker.run_until_idle(max_runs=1)
    assert sleeping.status is RunStatus.DEFERRED
    assert journaled_wake(saver, db_dsn, run.thread_id) == due
    assert sleeping.retry_at == due


@pytest.mark.parametrize("delay", [math.nan, math.inf, -math.inf, 1e12, timedelta.max, "1", True])
def test_a_delay_durable_sleep_cannot_wait_is_a_named_error(delay: Any) -> None:
    with pytest.raises(InvalidInputError, match=r"durable_sleep\("):
        durable_sleep(delay)
    with pytest.raises(InvalidInputError, match=r"durable_sleep\("):
        asyncio.run(adurable_sleep(delay))


def test_an_unknown_effect_blocks_the_run_until_someone_decides(
    saver: DurablePostgresSaver, runs: RunRegistry
) -> None:
    name = f"mailer-{uuid.uuid4().hex[:6]}"

    @effect(name=name)
    def send() -> str:
        raise TimeoutError("the mailer did not answer")

    graph = graph_of(saver, ("send", lambda s: {"answer": send()}))
    worker = Worker(saver, [graph])
    run = runs.create(graph, {"log": []})
    (blocked,) = worker.run_until_idle()
    assert blocked.status is RunStatus.BLOCKED
    assert blocked.status_reason is not None
    assert blocked.status_reason.startswith("effect: ")
    assert "TimeoutError" in blocked.status_reason
    # The next step named is the registry's, after the effect's own advice.
    assert blocked.status_reason.endswith(
        f"retry the run (`langgraph-durable runs retry {run.run_id}`, or "
        "RunRegistry.retry(run_id)) rather than invoke the thread yourself."
    )
    assert runs.wait_for(run.run_id).status is RunStatus.BLOCKED
    journal = EffectJournal(saver.conn)  # type: ignore[arg-type]
    (row,) = [r for r in journal.open_effects(run.thread_id) if r["status"] == "unknown"]
    journal.resolve(row["key"], completed="mail-1")  # the operator checked the mailer
    runs.retry(run.run_id)
    (done,) = worker.run_until_idle()
    assert done.status is RunStatus.SUCCESS
    assert runs.output_of(done)["answer"] == "mail-1"


def test_a_run_is_pinned_to_its_version(saver: DurablePostgresSaver, runs: RunRegistry) -> None:
    name = f"refunds-{uuid.uuid4().hex[:6]}"
    old = graph_of(saver, step("old"), name=name, version="2026-11")
    new = graph_of(saver, step("new"), name=name, version="2026-12")
    run = runs.create(old, {"log": []})
    new_worker = Worker(saver, [new])
    assert new_worker.run_until_idle() == []  # never runs another version's run
    (blocked,) = runs.list(thread_id=run.thread_id)
    assert blocked.status is RunStatus.BLOCKED
    assert blocked.status_reason is not None
    assert "version 2026-11" in blocked.status_reason
    assert "versions 2026-12" in blocked.status_reason
    # A worker of the old version (say, one still draining) takes it back.
    (done,) = Worker(saver, [old]).run_until_idle()
    assert runs.output_of(done) == {"log": ["old"]}


@pytest.mark.parametrize("where", ["interrupt_before", "interrupt_after"])
def test_a_graph_with_static_breakpoints_is_refused(
    saver: DurablePostgresSaver, where: str
) -> None:
    """A run stopped at a breakpoint asks no question: it would be recorded as finished
    (`success`) with half its work done, and could not be resumed."""
    builder = StateGraph(State)
    builder.add_node("a", lambda s: {"log": ["a"]})
    builder.add_edge(START, "a")
    builder.add_edge("a", END)
    graph = builder.compile(checkpointer=saver, **{where: ["a"]})
    with pytest.raises(ConfigurationError, match="interrupt\\(\\) inside the node"):
        GraphVersion("breakpoints", "1", graph)


def thread_row(dsn: str, thread: str) -> tuple[Any, ...]:
    """(fencing_token, owner, run_id) of a thread's lease row."""
    ((row),) = sql(
        dsn,
        "SELECT fencing_token, owner, run_id FROM langgraph_durable_threads WHERE thread_id = %s",
        thread,
    )
    return tuple(row)


def died_mid_run(dsn: str, run_id: str, thread: str) -> None:
    """The run was taken by a worker that died: its run and thread leases ran out."""
    sql(
        dsn,
        "UPDATE langgraph_durable_runs SET status = 'running', attempt = attempt + 1,"
        " owner = 'gone', lease_expires_at = now() - interval '1s' WHERE run_id = %s",
        run_id,
    )
    sql(
        dsn,
        "UPDATE langgraph_durable_threads SET fencing_token = fencing_token + 1, owner = 'gone',"
        " run_id = %s, lease_expires_at = now() - interval '1s' WHERE thread_id = %s",
        run_id,
        thread,
    )


def test_a_run_whose_worker_died_is_blocked_when_no_live_worker_takes_its_version(
    saver: DurablePostgresSaver, runs: RunRegistry, db_dsn: str
) -> None:
    """A worker of the old version was cut off mid-run during a deploy; only new workers
    are live. The run must become visibly blocked (I6), not stay running and unclaimed;
    the cut-off worker must not advance the thread any more, and a worker of the run's
    version takes it back."""
    inside, release = threading.Event(), threading.Event()

    def slow(state: State) -> State:
        inside.set()
        release.wait(60)
        return {"log": ["slow"]}

    name = f"deploy-{uuid.uuid4().hex[:6]}"
    old = graph_of(saver, step("a"), ("slow", slow), step("after"), name=name, version="old")
    new = graph_of(saver, step("new"), name=name, version="new")
    run = runs.create(old, {"log": []})
    cut_off = Worker(saver, [old], lease_seconds=600)  # no heartbeat during the test
    results: list[Any] = []
    thread = threading.Thread(target=lambda: results.append(cut_off.run_until_idle(max_runs=1)))
    thread.start()
    try:
        assert inside.wait(60)
        token, _, _ = thread_row(db_dsn, run.thread_id)
        sql(  # its leases run out, and it stops saying it is alive
            db_dsn,
            "UPDATE langgraph_durable_runs SET lease_expires_at = now() - interval '1s'"
            " WHERE run_id = %s",
            run.run_id,
        )
        expire_thread_lease(db_dsn, run.thread_id)
        sql(db_dsn, "DELETE FROM langgraph_durable_workers WHERE worker_id = %s", cut_off.worker_id)
        assert Worker(saver, [new]).run_until_idle() == []
        blocked = runs.get(run.run_id)
        assert blocked.status is RunStatus.BLOCKED
        assert blocked.status_reason is not None
        assert "version old" in blocked.status_reason
        # Taken from the cut-off worker like a claim would, still naming the run in flight.
        assert thread_row(db_dsn, run.thread_id) == (token + 1, None, run.run_id)
        before = sql(db_dsn, "SELECT count(*) FROM checkpoints WHERE thread_id = %s", run.thread_id)
    finally:
        release.set()
        thread.join(60)
    (stale,) = results[0]
    assert stale.status is RunStatus.BLOCKED  # its finish was refused
    after = sql(db_dsn, "SELECT count(*) FROM checkpoints WHERE thread_id = %s", run.thread_id)
    assert after == before  # and so was its step
    (done,) = Worker(saver, [old]).run_until_idle()  # a worker of its version takes it
    assert (done.run_id, done.status) == (run.run_id, RunStatus.SUCCESS)
    assert runs.output_of(done) == {"log": ["a", "slow", "after"]}


def test_a_blocked_run_in_flight_goes_on_before_an_older_run_retried_meanwhile(
    saver: DurablePostgresSaver, runs: RunRegistry, db_dsn: str
) -> None:
    """R1 failed; R2 of its thread started under an old-version worker that died, and was
    blocked (no live worker took its version). R1 is retried meanwhile: R2 is still in
    flight, so it goes on first when a worker of its version comes, as it would have had
    its worker died without the block (one run of a thread at a time, the one in flight
    first); R1 waits for it, and is not blocked by it for good."""
    fails = {"n": 0}

    def flaky(state: State) -> State:
        fails["n"] += 1
        if fails["n"] == 1:
            raise RuntimeError("first try fails")
        return {"log": ["ok"]}

    name = f"deploy-{uuid.uuid4().hex[:6]}"
    old = graph_of(saver, ("flaky", flaky), name=name, version="old")
    new = graph_of(saver, step("new"), name=name, version="new")
    first = runs.create(old, {"log": []}, max_attempts=1)
    (failed,) = Worker(saver, [old]).run_until_idle()
    assert failed.status is RunStatus.ERROR
    second = runs.create(old, {"log": []}, thread_id=first.thread_id)
    died_mid_run(db_dsn, second.run_id, first.thread_id)
    sql(db_dsn, "DELETE FROM langgraph_durable_workers WHERE graphs::text LIKE %s", f"%{name}%")
    assert Worker(saver, [new]).run_until_idle() == []
    assert runs.get(second.run_id).status is RunStatus.BLOCKED
    runs.retry(first.run_id)
    done = Worker(saver, [old]).run_until_idle()
    assert [d.run_id for d in done] == [second.run_id, first.run_id]
    assert all(d.status is RunStatus.SUCCESS for d in done)


def test_compatible_and_migrated_versions_run_on_newer_code(
    saver: DurablePostgresSaver, runs: RunRegistry
) -> None:
    name = f"deals-{uuid.uuid4().hex[:6]}"
    migrated: list[str] = []

    def migrate(graph: Any, config: Any) -> None:
        assert "run_id" not in config["metadata"]  # see for_migration_hook
        migrated.append(config["configurable"]["thread_id"])
        graph.update_state(config, {"log": ["migrated"]})

    v1 = graph_of(saver, step("a"), name=name, version="1")
    v2 = graph_of(saver, step("a"), name=name, version="2", compatible_with={"1"})
    v3 = graph_of(saver, step("a"), name=name, version="3", migrations={"2": migrate})
    compatible = runs.create(v1, {"log": []})
    (done,) = Worker(saver, [v2]).run_until_idle()
    assert (done.run_id, done.graph_version) == (compatible.run_id, "1")
    # Its input is sent after the hook's update, not dropped: the update's checkpoint
    # carries the run's id, but took no input in.
    moved = runs.create(v2, {"log": ["input"]})
    (done,) = Worker(saver, [v3]).run_until_idle()
    assert migrated == [moved.thread_id]
    assert done.graph_version == "3"
    assert runs.output_of(done) == {"log": ["migrated", "input", "a"]}


def test_an_operator_moves_a_blocked_run_to_another_version(
    saver: DurablePostgresSaver, runs: RunRegistry
) -> None:
    name = f"moved-{uuid.uuid4().hex[:6]}"
    old = graph_of(saver, step("a"), name=name, version="old")
    new = graph_of(saver, step("a"), name=name, version="new")
    run = runs.create(old, {"log": []})
    worker = Worker(saver, [new])
    assert worker.run_until_idle() == []
    runs.migrate(run.run_id, "new")
    (done,) = worker.run_until_idle()
    assert (done.status, done.graph_version) == (RunStatus.SUCCESS, "new")


def test_stuck_runs_are_flagged_once_and_healthy_ones_never(
    saver: DurablePostgresSaver, runs: RunRegistry, db_dsn: str
) -> None:
    release = threading.Event()
    graph = graph_of(
        saver,
        ("slow", lambda s: release.wait(60) and {"log": ["slow"]}),
        stuck_after=timedelta(minutes=5),
    )
    worker = Worker(saver, [graph])
    stalled = runs.create(graph, {"log": []})
    healthy = runs.create(graph, {"log": []})
    for run in (stalled, healthy):  # both running, as if on workers elsewhere
        sql(
            db_dsn,
            "UPDATE langgraph_durable_runs SET status = 'running', owner = 'elsewhere', "
            "lease_expires_at = now() + interval '1 hour', last_progress_at = now() "
            "WHERE run_id = %s",
            run.run_id,
        )
    sql(
        db_dsn,
        "UPDATE langgraph_durable_runs SET last_progress_at = now() - interval '6 minutes' "
        "WHERE run_id = %s",
        stalled.run_id,
    )
    worker.run_until_idle()  # sweeps first
    worker.run_until_idle()  # and again: flagged once
    flagged = [r.run_id for r in runs.stuck()]
    assert stalled.run_id in flagged
    assert healthy.run_id not in flagged
    first_flag = runs.get(stalled.run_id).stuck_since
    worker.run_until_idle()
    assert runs.get(stalled.run_id).stuck_since == first_flag
    release.set()


def test_a_run_past_its_deadline_times_out(
    saver: DurablePostgresSaver, runs: RunRegistry, db_dsn: str
) -> None:
    graph = graph_of(saver, step("a"))
    run = runs.create(graph, {"log": []}, timeout=3600)
    sql(
        db_dsn,
        "UPDATE langgraph_durable_runs SET deadline_at = now() - interval '1 second' "
        "WHERE run_id = %s",
        run.run_id,
    )
    assert Worker(saver, [graph]).run_until_idle() == []
    timed_out = runs.get(run.run_id)
    assert timed_out.status is RunStatus.TIMEOUT
    assert timed_out.agent_server_status == "timeout"


def until(condition: Callable[[], bool]) -> None:
    """Waits for `condition` (database state a worker changes), at most `HANG_GUARD_S`."""
    deadline = time.monotonic() + HANG_GUARD_S
    while not condition():
        assert time.monotonic() < deadline, "the condition never came true"
        time.sleep(0.01)


def test_a_busy_worker_still_sweeps_and_times_its_own_run_out(
    saver: DurablePostgresSaver, runs: RunRegistry, db_dsn: str
) -> None:
    """One worker, busy in a node of its only run: no idle worker sweeps, so its own sweep
    goes on while the run runs. It flags the stalled run, times it out and fences it out:
    once the node returns, its step is refused and the run stays `timeout` (not `success`),
    as when another worker's sweep times it out."""
    inside, release = threading.Event(), threading.Event()

    def slow(state: State) -> State:
        inside.set()
        release.wait(HANG_GUARD_S)
        return {"log": ["slow"]}

    graph = graph_of(
        saver, step("a"), ("slow", slow), step("after"), stuck_after=timedelta(minutes=5)
    )
    run = runs.create(graph, {"log": []}, timeout=3600)
    worker = Worker(saver, [graph], lease_seconds=0.6)  # sweeps every 0.2 s
    results: list[list[Any]] = []
    thread = threading.Thread(target=lambda: results.append(worker.run_until_idle()))
    thread.start()
    count = "SELECT count(*) FROM checkpoints WHERE thread_id = %s"
    try:
        assert inside.wait(HANG_GUARD_S)
        before = sql(db_dsn, count, run.thread_id)
        sql(
            db_dsn,
            "UPDATE langgraph_durable_runs SET last_progress_at = now() - interval '6 minutes'"
            " WHERE run_id = %s",
            run.run_id,
        )
        until(lambda: runs.get(run.run_id).stuck_since is not None)
        sql(
            db_dsn,
            "UPDATE langgraph_durable_runs SET deadline_at = now() - interval '1 second'"
            " WHERE run_id = %s",
            run.run_id,
        )
        ended = runs.wait_for(run.run_id, timeout=HANG_GUARD_S)
        assert ended.status is RunStatus.TIMEOUT  # while the node still runs
    finally:
        release.set()
        thread.join(HANG_GUARD_S)
    (finished,) = results[0]
    assert finished.status is RunStatus.TIMEOUT
    assert sql(db_dsn, count, run.thread_id) == before  # its next step was refused
    assert runs.output_of(finished) is None


def test_an_older_run_retried_while_a_newer_one_is_in_flight_waits_for_it(
    saver: DurablePostgresSaver, runs: RunRegistry, db_dsn: str
) -> None:
    """R1 failed; R2 of the same thread started, and its worker died. R1 is retried: the
    next claim must recover R2 first (one running run per thread), not take R1 and break
    that rule (a raw unique violation that stopped every worker)."""
    fails = {"n": 0}

    def flaky(state: State) -> State:
        fails["n"] += 1
        if fails["n"] == 1:
            raise RuntimeError("first try fails")
        return {"log": ["ok"]}

    graph = graph_of(saver, ("flaky", flaky))
    worker = Worker(saver, [graph])
    first = runs.create(graph, {"log": []}, max_attempts=1)
    (failed,) = worker.run_until_idle()
    assert failed.status is RunStatus.ERROR
    second = runs.create(graph, {"log": []}, thread_id=first.thread_id)
    died_mid_run(db_dsn, second.run_id, first.thread_id)  # R2 in flight, its worker gone
    runs.retry(first.run_id)
    done = worker.run_until_idle()
    assert [d.run_id for d in done] == [second.run_id, first.run_id]
    assert all(d.status is RunStatus.SUCCESS for d in done)


def test_a_retried_timed_out_run_gets_its_whole_timeout_again(
    saver: DurablePostgresSaver, runs: RunRegistry, db_dsn: str
) -> None:
    """Created a day ago with a one-hour timeout, it timed out; each retry gives it one
    hour from then, however often (not its old deadline, which would time it out at once,
    nor a timeout grown by the time that had passed)."""
    graph = graph_of(saver, step("a"))
    run = runs.create(graph, {"log": []}, timeout=3600)

    def timed_out_again(shift: str) -> None:
        sql(
            db_dsn,
            "UPDATE langgraph_durable_runs SET created_at = created_at - %s::interval,"
            " deadline_at = now() - interval '1 second' WHERE run_id = %s",
            shift,
            run.run_id,
        )
        runs.sweep([graph], worker_id="sweeper", live_seconds=60)
        assert runs.get(run.run_id).status is RunStatus.TIMEOUT

    def hours_left() -> float:
        ((left,),) = sql(
            db_dsn,
            "SELECT extract(epoch FROM deadline_at - clock_timestamp()) / 3600"
            " FROM langgraph_durable_runs WHERE run_id = %s",
            run.run_id,
        )
        return float(left)

    for shift in ("1 day", "0 seconds"):
        timed_out_again(shift)
        runs.retry(run.run_id)
        assert 0.9 < hours_left() <= 1.0
    (done,) = Worker(saver, [graph]).run_until_idle()
    assert done.status is RunStatus.SUCCESS
    assert runs.output_of(done) == {"log": ["a"]}


def test_a_worker_that_lost_its_run_cannot_advance_the_thread(
    saver: DurablePostgresSaver, runs: RunRegistry, db_dsn: str
) -> None:
    inside, release = threading.Event(), threading.Event()

    def slow(state: State) -> State:
        inside.set()
        release.wait(60)
        return {"log": ["slow"]}

    graph = graph_of(saver, step("a"), ("slow", slow), step("after"))
    run = runs.create(graph, {"log": []})
    worker = Worker(saver, [graph])
    results: list[Any] = []
    thread = threading.Thread(target=lambda: results.append(worker.run_until_idle()))
    thread.start()
    assert inside.wait(60)
    before = sql(db_dsn, "SELECT count(*) FROM checkpoints WHERE thread_id = %s", run.thread_id)[0][
        0
    ]
    cancelled = runs.cancel(run.run_id)  # takes the thread away from the worker
    assert cancelled.status is RunStatus.CANCELLED
    release.set()
    thread.join(60)
    (finished,) = results[0]
    assert finished.status is RunStatus.CANCELLED  # the worker did not overwrite it
    after = sql(db_dsn, "SELECT count(*) FROM checkpoints WHERE thread_id = %s", run.thread_id)[0][
        0
    ]
    assert after == before  # the stale worker's step was refused
    assert "after" not in str(runs.output_of(finished))


@pytest.mark.parametrize("durability", ["sync", "async", "exit"])
def test_a_cancelled_runs_later_effects_do_not_act_in_any_durability_mode(
    saver: DurablePostgresSaver, runs: RunRegistry, durability: str
) -> None:
    """Under "async" and "exit" LangGraph runs the next steps before the fenced checkpoint
    write fails, so a cancelled (or taken over, or superseded) run ran its later nodes,
    and their effects acted. The claim is fenced now: only the node already running
    finishes."""
    inside, release = threading.Event(), threading.Event()
    sent: list[str] = []

    def slow(state: State) -> State:
        inside.set()
        release.wait(60)
        return {"log": ["slow"]}

    @effect(key=lambda what: f"mail-{what}-{uuid.uuid4()}")
    def mail(what: str) -> str:
        sent.append(what)
        return what

    def notify(state: State) -> State:
        return {"log": [mail("notify")]}

    graph = graph_of(saver, ("slow", slow), ("notify", notify), step("after"))
    run = runs.create(graph, {"log": []}, durability=durability)  # type: ignore[arg-type]
    worker = Worker(saver, [graph])
    results: list[Any] = []
    thread = threading.Thread(target=lambda: results.append(worker.run_until_idle()))
    thread.start()
    assert inside.wait(60)
    assert runs.cancel(run.run_id).status is RunStatus.CANCELLED
    release.set()
    thread.join(60)
    (finished,) = results[0]
    assert finished.status is RunStatus.CANCELLED
    assert sent == []


@pytest.mark.parametrize("durability", ["sync", "async", "exit"])
def test_a_run_that_lost_its_lease_stops_after_the_step_under_way(
    saver: DurablePostgresSaver,
    runs: RunRegistry,
    durability: str,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Under "async" and "exit" a cancelled (taken over, timed out) run computed its
    later nodes to the end, each write and effect refused; once its heartbeat finds the
    lease gone, the worker drains the graph: the node under way finishes, no other
    starts."""
    inside, release = threading.Event(), threading.Event()
    ran: list[str] = []

    def slow(state: State) -> State:
        inside.set()
        release.wait(60)
        return {"log": ["slow"]}

    def later(name: str) -> tuple[str, Callable[[State], Any]]:
        return name, lambda s: ran.append(name) or {"log": [name]}

    graph = graph_of(saver, ("slow", slow), later("after"), later("last"))
    run = runs.create(graph, {"log": []}, durability=durability)  # type: ignore[arg-type]
    worker = Worker(saver, [graph], lease_seconds=0.6)  # a heartbeat every 0.2 s
    results: list[Any] = []
    thread = threading.Thread(target=lambda: results.append(worker.run_until_idle()))
    beats = count_run_heartbeats(monkeypatch)

    def lost() -> list[logging.LogRecord]:
        return [r for r in caplog.records if "lease was taken over" in r.getMessage()]

    thread.start()
    try:
        assert inside.wait(60)
        assert runs.cancel(run.run_id).status is RunStatus.CANCELLED
        guard = time.monotonic() + 60  # only a guard against a hang
        while not lost():
            assert time.monotonic() < guard, "the heartbeat never found the lease gone"
            time.sleep(0.01)
        seen = len(beats)
        while len(beats) < seen + 3:  # three more beats while the slow node runs on
            assert time.monotonic() < guard, "the heartbeat stopped beating"
            time.sleep(0.01)
    finally:
        release.set()
        thread.join(60)
    (finished,) = results[0]
    assert finished.status is RunStatus.CANCELLED
    assert ran == []
    assert len(lost()) == 1  # said once, not at every later beat


def count_run_heartbeats(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """A list that grows by one at each beat of a worker's run heartbeat (not its sweep)."""
    beats: list[float] = []

    class Counted(Heartbeat):
        def __init__(self, beat: Callable[[], object], every: float, what: str) -> None:
            super().__init__(beat, every, what)
            self.counted = beat.__qualname__.endswith("execute.<locals>.beat")

        def beat(self) -> None:
            super().beat()
            if self.counted:
                beats.append(time.monotonic())

    monkeypatch.setattr(worker_module, "Heartbeat", Counted)
    return beats


def test_exclusive_keeps_its_lease_while_its_block_runs(runs: RunRegistry, db_dsn: str) -> None:
    """An approved node running longer than the lease (`resume_approval` and the console
    answer under `exclusive`) kept it no longer: anyone could take the thread, and the
    holder was fenced out after its effects had acted."""
    thread = f"t-{uuid.uuid4()}"
    with runs.exclusive(thread, lease_seconds=0.6):
        seen: list[Any] = []
        guard = time.monotonic() + 60  # only a guard against a hang
        while len(seen) < 4:  # the lease moved on three times: past its first expiry
            assert time.monotonic() < guard, f"the lease moved {len(seen) - 1} times"
            ((expires,),) = sql(
                db_dsn,
                "SELECT lease_expires_at FROM langgraph_durable_threads WHERE thread_id = %s",
                thread,
            )
            if not seen or expires > seen[-1]:
                seen.append(expires)
            time.sleep(0.01)
        with pytest.raises(ThreadBusyError), runs.exclusive(thread):
            pass


def test_exclusive_lets_one_plain_invoke_run_a_thread(
    saver: DurablePostgresSaver, runs: RunRegistry, db_dsn: str
) -> None:
    graph = graph_of(saver, step("a")).graph
    thread = f"t-{uuid.uuid4()}"
    with runs.exclusive(thread) as config:
        with (
            pytest.raises(ThreadBusyError, match="held by another process"),
            runs.exclusive(thread),
        ):
            pass
        graph.invoke({"log": []}, config)
    with runs.exclusive(thread) as stale:  # free again once released
        expire_thread_lease(db_dsn, thread)
        with runs.exclusive(thread) as fresh:
            graph.invoke({"log": []}, fresh)
        before = sql(db_dsn, "SELECT count(*) FROM checkpoints WHERE thread_id = %s", thread)
        with pytest.raises(FencedOutError, match="no longer holds the thread"):
            graph.invoke({"log": []}, stale)  # refused: nothing written
        after = sql(db_dsn, "SELECT count(*) FROM checkpoints WHERE thread_id = %s", thread)
        assert after == before


def test_a_stale_holder_s_writes_are_refused_whichever_way_they_are_stored(
    saver: DurablePostgresSaver, runs: RunRegistry, db_dsn: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Writes stored on their own (an error, which LangGraph waits for), in the caller's
    transaction, or parked for a put of the new holder: none goes past the fence."""
    graph = graph_of(saver, step("a")).graph
    thread = f"t-{uuid.uuid4()}"
    with runs.exclusive(thread) as stale:
        graph.invoke({"log": []}, stale)
        expire_thread_lease(db_dsn, thread)
        with runs.exclusive(thread) as fresh:
            latest = saver.get_tuple({"configurable": {"thread_id": thread}})
            assert latest is not None
            at = latest.config["configurable"]["checkpoint_id"]
            stale_at: Any = {
                **stale,
                "configurable": {**stale["configurable"], "checkpoint_id": at, "checkpoint_ns": ""},
            }
            fresh_at: Any = {
                **fresh,
                "configurable": {**fresh["configurable"], "checkpoint_id": at, "checkpoint_ns": ""},
            }
            count = "SELECT count(*) FROM checkpoint_writes WHERE thread_id = %s"
            before = sql(db_dsn, count, thread)
            with pytest.raises(FencedOutError, match="no longer holds the thread"):
                saver.put_writes(stale_at, [("__error__", ValueError("late"))], "stale-task")
            with (
                psycopg.connect(db_dsn, row_factory=dict_row) as conn,
                pytest.raises(FencedOutError),
            ):
                put_writes_txn(conn, stale_at, [("log", ["late"])], "stale-txn", serde=saver.serde)
            assert sql(db_dsn, count, thread) == before
            # A stale holder's regular writes, parked in this process when the new holder's
            # put comes: the put's fence is the new token, so it must not carry them.
            lingering = DurablePostgresSaver(saver.conn, write_linger=1.0)
            # Parked writes wait for a put however long this machine takes to get to it
            # (a correct run never waits this out), as in test_parked_writes.py.
            lingering._parking._registry.linger = lingering._parking._registry.wait = 60.0
            in_loop: Any = {
                **stale_at,
                "configurable": {**stale_at["configurable"], CONFIG_KEY_RUNTIME: object()},
            }
            # Parked: put_writes returns at once, the writes wait for a put.
            lingering.put_writes(in_loop, [("log", ["late"])], "stale-parked")
            parked = lingering._parking._registry.parked
            key = (thread, "", at)
            assert key in parked, "the writes were stored instead of parked"
            lingering.put(fresh_at, empty_checkpoint(), {"source": "loop", "step": 9}, {})
            assert [entry.params["task_id"] for entry in parked[key]] == ["stale-parked"]
            # The stale holder's own next put takes them, and is fenced out with them.
            with pytest.raises(FencedOutError):
                lingering.put(stale_at, empty_checkpoint(), {"source": "loop", "step": 9}, {})
            # Their writer had returned when they parked; the failed put stored them alone,
            # behind their own fence, which refused them too (logged: nobody to raise to).
            assert "could not be stored" in caplog.text
            assert "no longer holds the thread" in caplog.text
            tasks = sql(
                db_dsn, "SELECT task_id FROM checkpoint_writes WHERE thread_id = %s", thread
            )
            assert all(not task.startswith("stale") for (task,) in tasks)


def test_bad_run_requests_are_named_before_anything_is_written(
    saver: DurablePostgresSaver, runs: RunRegistry
) -> None:
    graph = graph_of(saver, step("a"))
    for bad, match in [
        ({"durability": "never"}, "durability"),
        ({"multitask_strategy": "queue"}, "multitask_strategy"),
        ({"max_attempts": 0}, "max_attempts"),
        ({"timeout": -1}, "timeout"),
        ({"config": {"configurable": {"thread_id": "x"}}}, "worker sets itself"),
        ({"config": {"configurable": {"when": object()}}}, "JSON values"),
        ({"config": {"recursion_limit": 5, "tags": ["x"]}}, "recursion_limit, tags"),
        ({"version": ""}, "version"),
    ]:
        with pytest.raises(InvalidInputError, match=match):
            runs.create(graph if "version" not in bad else graph.name, {"log": []}, **bad)
    assert runs.list(graph_name=graph.name) == []  # nothing was created
    with pytest.raises(RunNotFoundError):
        runs.get("no-such-run")


def test_cancel_leaves_a_finished_run_as_it_ended(
    saver: DurablePostgresSaver, runs: RunRegistry
) -> None:
    graph = graph_of(saver, step("a"))
    run = runs.create(graph, {"log": []})
    Worker(saver, [graph]).run_until_idle()
    with pytest.raises(RunConflictError, match="is success; only a pending"):
        runs.cancel(run.run_id)
    assert runs.get(run.run_id).status is RunStatus.SUCCESS


def test_wait_for_keeps_its_timeout_when_other_runs_make_news(
    db_dsn: str, saver: DurablePostgresSaver, runs: RunRegistry
) -> None:
    """Notifications about other runs wake the waiter; they do not use up its timeout."""
    nobody_runs_it = graph_of(saver, step("a"))
    run = runs.create(nobody_runs_it, {"log": []})
    stop = threading.Event()

    def chatter() -> None:
        with psycopg.connect(db_dsn, autocommit=True) as conn:
            while not stop.is_set():
                conn.execute("SELECT pg_notify('langgraph_durable_runs', 'other-run')")
                stop.wait(0.01)

    noise = threading.Thread(target=chatter)
    noise.start()
    started = time.monotonic()
    try:
        found = runs.wait_for(run.run_id, timeout=2.0)
    finally:
        stop.set()
        noise.join()
    assert found.status is RunStatus.PENDING
    assert time.monotonic() - started >= 2.0  # a lower bound: no machine makes it shorter
    runs.cancel(run.run_id)


def test_a_busy_worker_stays_alive_in_the_workers_table(
    db_dsn: str, saver: DurablePostgresSaver, runs: RunRegistry
) -> None:
    graph = graph_of(saver, step("a"))
    run = runs.create(graph, {"log": []})
    worker = Worker(saver, [graph], name=f"w-{uuid.uuid4().hex[:6]}")
    claimed = runs.claim([graph], owner=worker.worker_id, lease_seconds=30)
    assert claimed is not None
    assert claimed.run_id == run.run_id
    sql(
        db_dsn,
        "INSERT INTO langgraph_durable_workers (worker_id, owner, graphs, heartbeat_at) "
        "VALUES (%s, 'x', '[]', now() - interval '1 hour')",
        worker.worker_id,
    )
    assert runs.heartbeat(claimed, 30, worker_id=worker.worker_id)
    ((age,),) = sql(
        db_dsn,
        "SELECT now() - heartbeat_at < interval '1 minute' FROM langgraph_durable_workers "
        "WHERE worker_id = %s",
        worker.worker_id,
    )
    assert age is True
    runs.cancel(run.run_id)


def test_a_migration_hook_that_raises_ends_the_attempt_not_the_worker(
    saver: DurablePostgresSaver, runs: RunRegistry
) -> None:
    name = f"poison-{uuid.uuid4().hex[:6]}"

    def broken(graph: Any, config: Any) -> None:
        raise ValueError("migration bug")

    v1 = graph_of(saver, step("a"), name=name, version="1")
    v2 = graph_of(saver, step("a"), name=name, version="2", migrations={"1": broken})
    run = runs.create(v1, {"log": []}, max_attempts=1)
    (done,) = Worker(saver, [v2]).run_until_idle()  # returns: the worker lives on
    assert (done.run_id, done.status, done.error_type) == (
        run.run_id,
        RunStatus.ERROR,
        "ValueError",
    )


@pytest.mark.parametrize("shape", ["fan_out", "parallel_start"])
def test_a_migrated_run_goes_on_from_where_it_stopped(
    saver: DurablePostgresSaver, runs: RunRegistry, shape: str
) -> None:
    """The worker marked a migration done with `update_state(config, None)`: LangGraph
    took that for a step, guessed its node, ran what follows it again and dropped the
    pending writes before it. A node that had finished beside the interrupted one ran
    again, and after a step of two nodes the update failed as ambiguous. The mark now
    goes into the latest checkpoint's metadata."""
    ran: list[str] = []

    def node(label: str, ask: bool = False) -> Callable[[State], State]:
        def run_node(state: State) -> State:
            ran.append(label)
            return {"log": [f"{label}:{interrupt('ok?')}" if ask else label]}

        return run_node

    def build(version: str, **options: Any) -> GraphVersion:
        builder = StateGraph(State)
        if shape == "fan_out":  # a -> (b1 finishes, b2 asks) -> z
            for label, ask in (("a", False), ("b1", False), ("b2", True), ("z", False)):
                builder.add_node(label, node(label, ask))
            builder.add_edge(START, "a")
            builder.add_edge("a", "b1")
            builder.add_edge("a", "b2")
            builder.add_edge(["b1", "b2"], "z")
            builder.add_edge("z", END)
        else:  # (p1, p2) -> ask
            for label, ask in (("p1", False), ("p2", False), ("ask", True)):
                builder.add_node(label, node(label, ask))
            builder.add_edge(START, "p1")
            builder.add_edge(START, "p2")
            builder.add_edge(["p1", "p2"], "ask")
            builder.add_edge("ask", END)
        compiled = builder.compile(checkpointer=saver)
        return GraphVersion(name, version, compiled, **options)

    name = f"migrate-{shape}-{uuid.uuid4().hex[:6]}"
    run = runs.create(build("1"), {"log": ["in"]})
    (waiting,) = Worker(saver, [build("1")]).run_until_idle()
    assert waiting.status is RunStatus.INTERRUPTED
    ran.clear()
    runs.resume(run.run_id, Command(resume="yes"))
    (done,) = Worker(saver, [build("2", migrations={"1": lambda g, c: None})]).run_until_idle()
    assert (done.status, done.graph_version) == (RunStatus.SUCCESS, "2"), done.error_message
    assert ran == (["b2", "z"] if shape == "fan_out" else ["ask"])


def test_a_sync_worker_refuses_a_migration_hook_it_cannot_await(
    saver: DurablePostgresSaver, runs: RunRegistry
) -> None:
    """The sync worker left an async hook's coroutine unawaited (a RuntimeWarning) and
    moved the run to the new version anyway: its state was never migrated."""
    name = f"async-hook-{uuid.uuid4().hex[:6]}"

    async def hook(graph: Any, config: Any) -> None:
        await graph.aupdate_state(config, {"log": ["migrated"]})

    v2 = graph_of(saver, step("a"), name=name, version="2", migrations={"1": hook})
    with pytest.raises(ConfigurationError, match="async function, which a sync Worker"):
        Worker(saver, [v2])
    # One that only returns an awaitable is found when it runs: nothing is migrated.
    hidden = graph_of(
        saver, step("a"), name=name, version="2", migrations={"1": lambda g, c: hook(g, c)}
    )
    v1 = graph_of(saver, step("a"), name=name, version="1")
    run = runs.create(v1, {"log": []}, max_attempts=1)
    (done,) = Worker(saver, [hidden]).run_until_idle()
    assert (done.run_id, done.status, done.error_type) == (
        run.run_id,
        RunStatus.ERROR,
        "ConfigurationError",
    )
    assert done.graph_version == "1"
    assert "returned an awaitable in a sync Worker" in (done.error_message or "")


def test_graph_versions_and_workers_refuse_what_they_cannot_run(
    saver: DurablePostgresSaver,
) -> None:
    """Each of these was accepted and failed later, as a raw error: an int `stuck_after`
    stopped the worker at its first sweep (AttributeError), a hook that is no function
    failed every run (TypeError), `compatible_with=None` or a worker given one graph
    instead of a list raised a bare TypeError."""
    assert graph_of(saver, step("a"), stuck_after=60).stuck_after == timedelta(seconds=60)
    waiting = graph_of(saver, step("a"), waiting_stuck_after=timedelta(hours=1))
    assert waiting.waiting_stuck_after == timedelta(hours=1)
    for options in (
        {"stuck_after": -1},
        {"stuck_after": timedelta(0)},
        {"waiting_stuck_after": timedelta(minutes=-5)},
        {"stuck_after": "15m"},
    ):
        with pytest.raises(InvalidInputError, match="stuck_after"):
            graph_of(saver, step("a"), **options)
    with pytest.raises(WrongArgumentTypeError, match="compatible_with"):
        graph_of(saver, step("a"), compatible_with=None)
    with pytest.raises(ConfigurationError, match="not a function"):
        graph_of(saver, step("a"), version="2", migrations={"1": "x"})
    with pytest.raises(ConfigurationError, match="the hook would never run"):
        graph_of(saver, step("a"), version="3", compatible_with={"1"}, migrations={"1": print})
    one = graph_of(saver, step("a"))
    assert Worker(saver, one).graphs == [one]  # type: ignore[arg-type]
    for graphs in (None, 5, []):
        with pytest.raises(ConfigurationError, match="a list of GraphVersion"):
            Worker(saver, graphs)  # type: ignore[arg-type]


def test_a_worker_on_a_pool_of_one_connection_runs_its_runs(db_dsn: str) -> None:
    """Listening for new runs held the pool's only connection: every claim waited for the
    pool, and `run_forever` stopped after `database_timeout`, saying the database could
    not be reached, with the run still pending. A pool of one now looks every
    `idle_wait`, as a single connection does."""
    worker: Worker | None = None

    def only(state: State) -> State:
        assert worker is not None
        worker.stop()  # run_forever returns once this run has finished
        return {"log": ["ran"]}

    with DurablePostgresSaver.from_conn_string(db_dsn, max_connections=1, pool_timeout=2) as saver:
        saver.setup()
        graph = graph_of(saver, ("only", only))
        run = RunRegistry(saver).create(graph, {"log": []})
        worker = Worker(saver, [graph], idle_wait=0.2, database_timeout=6)
        worker.run_forever(handle_sigterm=False)
        done = RunRegistry(saver).get(run.run_id)
    assert done.status is RunStatus.SUCCESS, done.status_reason


def test_a_queued_runs_deadline_does_not_fence_out_the_running_one(
    saver: DurablePostgresSaver, runs: RunRegistry, db_dsn: str
) -> None:
    graph = graph_of(saver, step("a"))
    thread = f"t-{uuid.uuid4().hex[:8]}"
    running = runs.create(graph, {"log": []}, thread_id=thread)
    queued = runs.create(graph, {"log": []}, thread_id=thread, timeout=3600)
    claimed = runs.claim([graph], owner="test-owner", lease_seconds=60)
    assert claimed is not None
    assert claimed.run_id == running.run_id
    sql(
        db_dsn,
        "UPDATE langgraph_durable_runs SET deadline_at = now() - interval '1 s' WHERE run_id = %s",
        queued.run_id,
    )
    runs.sweep([graph], worker_id="test-sweeper", live_seconds=90)
    assert runs.get(queued.run_id).status is RunStatus.TIMEOUT
    assert runs.heartbeat(claimed, 60)  # the running run still holds its thread
    runs.cancel(running.run_id)
