"""The registry's rules on a real database: lock order, attempts, inputs it refuses.

- Lock order: every registry change (create with a multitask strategy, cancel, resume)
  locks a thread's row before its runs' rows. A worker's finish and heartbeat take them in
  the same order, so a registry change that holds the thread while a worker reports can
  never deadlock with it (PostgreSQL would abort one of the two with 40P01).
- Attempts: `attempt` counts executions that failed or whose worker died; waiting at an
  interrupt, a deferral, a hand-back or a lost database give the attempt back, and so does
  an answer the approval node refuses (the question still waits for a corrected one).
- Idle waits: an idle worker looks again when a run it could take comes due (`runs_next_due`
  counts only what `run_claim` would take), not while runs it cannot take are past due.
- Inputs: bad ids, filters and configs are named errors before any SQL runs.
"""

from __future__ import annotations

import gc
import json
import threading
import uuid
from collections.abc import Callable
from typing import Any

import psycopg
import pytest
from graphs import linear_graph
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt
from typing_extensions import TypedDict

from langgraph_durable import (
    DatabaseUnreachableError,
    DurablePostgresSaver,
    GraphVersion,
    InvalidInputError,
    InvalidThreadIdError,
    RetryLater,
    Run,
    RunConflictError,
    RunRegistry,
    RunStatus,
    Worker,
    effect,
)
from langgraph_durable._sql import QUERIES
from langgraph_durable.approvals import approval_node
from langgraph_durable.runs._model import Outcome, outcome_of


class State(TypedDict, total=False):
    log: list[str]
    answer: Any
    approval: dict[str, Any]
    approval_outcome: str


def one_node(saver: DurablePostgresSaver, fn: Callable[[State], Any]) -> GraphVersion:
    builder = StateGraph(State)
    builder.add_node("only", fn)
    builder.add_edge(START, "only")
    builder.add_edge("only", END)
    return GraphVersion(f"g-{uuid.uuid4().hex[:8]}", "1", builder.compile(checkpointer=saver))


def wait_until_blocked_on_a_lock(dsn: str, holder: psycopg.Connection[Any]) -> None:
    """Until some backend waits for a lock `holder` holds (read in pg_locks)."""
    holder_pid = holder.info.backend_pid
    with psycopg.connect(dsn, autocommit=True) as conn:
        while not conn.execute(
            "SELECT 1 FROM pg_stat_activity WHERE %s = ANY(pg_blocking_pids(pid))",
            (holder_pid,),
        ).fetchall():
            conn.execute("SELECT pg_sleep(0.01)")  # a poll interval of a state wait


@pytest.mark.parametrize("report", ["finish", "heartbeat"])
def test_a_workers_report_and_a_registry_change_take_locks_in_one_order(
    db_dsn: str, saver: DurablePostgresSaver, runs: RunRegistry, report: str
) -> None:
    graph = one_node(saver, lambda s: {"log": ["a"]})
    created = runs.create(graph, {"log": []})
    run = runs.claim([graph], owner="test-worker", lease_seconds=60)
    assert run is not None
    assert run.run_id == created.run_id

    results: list[Any] = []

    def worker_reports() -> None:
        try:
            if report == "finish":
                results.append(runs.finish(run, outcome_of(run, output={"log": ["a"]})))
            else:
                results.append(runs.heartbeat(run, 60))
        except BaseException as exc:
            results.append(exc)

    with psycopg.connect(db_dsn) as change:
        # What `create(..., multitask_strategy="interrupt")` and `cancel` do, held open
        # between the thread's lock and the run's update.
        change.execute(QUERIES["thread_lease_row"], {"thread_id": run.thread_id})
        reporter = threading.Thread(target=worker_reports)
        reporter.start()
        wait_until_blocked_on_a_lock(db_dsn, change)
        change.execute(
            QUERIES["runs_set_status"],
            {"run_ids": [run.run_id], "status": "interrupted", "reason": "superseded"},
        )
        change.execute(QUERIES["thread_fence_bump"], {"thread_id": run.thread_id})
        change.commit()  # no DeadlockDetected: the worker never held the run's row
        reporter.join()

    assert results == [False]  # the run is not the worker's any more: nothing written
    assert runs.get(run.run_id).status is RunStatus.INTERRUPTED


def test_a_claim_skips_a_thread_a_registry_change_holds(
    db_dsn: str, saver: DurablePostgresSaver, runs: RunRegistry
) -> None:
    graph = one_node(saver, lambda s: {"log": ["a"]})
    run = runs.create(graph, {"log": []})
    with psycopg.connect(db_dsn) as change:
        change.execute(QUERIES["thread_lease_row"], {"thread_id": run.thread_id})
        # It neither waits for the thread's row nor takes the run's (which the change may
        # want next): it passes the run by.
        assert runs.claim([graph], owner="test-worker", lease_seconds=60) is None
        change.execute(
            QUERIES["runs_set_status"],
            {"run_ids": [run.run_id], "status": "cancelled", "reason": "cancelled"},
        )
        change.commit()
    assert runs.get(run.run_id).status is RunStatus.CANCELLED
    assert runs.claim([graph], owner="test-worker", lease_seconds=60) is None


def test_waiting_and_hand_backs_do_not_use_attempts_up(
    saver: DurablePostgresSaver, runs: RunRegistry, db_dsn: str
) -> None:
    asked: list[int] = []

    def approve(state: State) -> State:
        answers = [interrupt(f"question {i}") for i in range(3)]
        asked.append(len(answers))
        return {"answer": answers}

    graph = one_node(saver, approve)
    run = runs.create(graph, {"log": []}, max_attempts=1)
    worker = Worker(saver, [graph])
    for i in range(3):
        (done,) = worker.run_until_idle()
        assert (done.status, done.attempt) == (RunStatus.INTERRUPTED, 0), i
        runs.resume(run.run_id, Command(resume=f"yes {i}"))
    (done,) = worker.run_until_idle()
    assert (done.status, done.attempt) == (RunStatus.SUCCESS, 1)
    assert runs.output_of(done)["answer"] == ["yes 0", "yes 1", "yes 2"]

    # A hand-back (the worker stopped mid-run) and a lost database give the attempt back.
    other = runs.create(graph, {"log": []}, max_attempts=1)
    claimed = runs.claim([graph], owner="test-worker", lease_seconds=60)
    assert claimed is not None
    assert claimed.run_id == other.run_id
    handed_back = outcome_of(claimed, error=KeyboardInterrupt()).handed_back()
    assert runs.finish(claimed, handed_back)
    assert runs.get(other.run_id).attempt == 0
    claimed = runs.claim([graph], owner="test-worker", lease_seconds=60)
    assert claimed is not None
    lost = DatabaseUnreachableError("the server went away")
    outage = outcome_of(claimed, error=lost)
    assert isinstance(outage, Outcome)
    assert outage.status is RunStatus.PENDING
    assert runs.finish(claimed, outage)
    assert runs.get(other.run_id).attempt == 0


def test_an_answer_the_approval_node_refuses_leaves_the_run_waiting_for_another(
    saver: DurablePostgresSaver, runs: RunRegistry
) -> None:
    """README: an invalid answer sent through `Command(resume=...)` leaves the run waiting,
    so the caller can answer again. Counted as a failure, it was retried with the same
    stored answer until the run ended as error, and `retry` replayed it again."""
    builder = StateGraph(State)
    builder.add_node(
        "approve",
        approval_node(request=lambda s: {"amount": 420}, on_approve="refund"),
        destinations=("refund", END),
    )
    builder.add_node("refund", lambda s: {"log": ["refunded"]})
    builder.add_edge(START, "approve")
    builder.add_edge("refund", END)
    graph = GraphVersion(f"g-{uuid.uuid4().hex[:8]}", "1", builder.compile(checkpointer=saver))
    run = runs.create(graph, {"log": []}, max_attempts=1)
    worker = Worker(saver, [graph])
    (asked,) = worker.run_until_idle()
    assert asked.status is RunStatus.INTERRUPTED
    runs.resume(run.run_id, Command(resume={"approved": True}))  # no approver: invalid
    (refused,) = worker.run_until_idle()
    assert (refused.status, refused.attempt, refused.error_type) == (
        RunStatus.INTERRUPTED,
        0,
        "InvalidDecisionError",
    )
    assert refused.status_reason is not None
    assert refused.status_reason.startswith(
        "answer refused, the question still waits: Invalid approval decision (approver"
    )
    runs.resume(run.run_id, Command(resume={"approved": True, "approver": "manager-ana"}))
    (done,) = worker.run_until_idle()
    assert (done.status, done.attempt, done.error_type) == (RunStatus.SUCCESS, 1, None)
    assert runs.output_of(done)["log"] == ["refunded"]


def test_an_invalid_answer_a_node_sends_to_another_thread_is_its_own_failure(
    saver: DurablePostgresSaver, runs: RunRegistry
) -> None:
    """Only a question of the run's own thread still waits after a refused answer: a run
    whose node answered another thread badly was parked as interrupted with nothing to
    answer (resume, retry and cancel all refused it), for good."""
    asking = StateGraph(State)
    asking.add_node(
        "approve",
        approval_node(request=lambda s: {"amount": 420}, on_approve="refund"),
        destinations=("refund", END),
    )
    asking.add_node("refund", lambda s: {"log": ["refunded"]})
    asking.add_edge(START, "approve")
    asking.add_edge("refund", END)
    other = asking.compile(checkpointer=saver)
    other_thread = f"other-{uuid.uuid4().hex[:8]}"
    other.invoke({"log": []}, {"configurable": {"thread_id": other_thread}})

    def answer_badly(state: State) -> State:
        other.invoke(
            Command(resume={"approved": True}), {"configurable": {"thread_id": other_thread}}
        )
        return {"log": ["never"]}

    builder = StateGraph(State)
    builder.add_node("answer", answer_badly)
    builder.add_edge(START, "answer")
    builder.add_edge("answer", END)
    graph = GraphVersion(f"g-{uuid.uuid4().hex[:8]}", "1", builder.compile(checkpointer=saver))
    runs.create(graph, {"log": []}, max_attempts=1)
    (failed,) = Worker(saver, [graph]).run_until_idle()
    assert (failed.status, failed.error_type) == (RunStatus.ERROR, "InvalidDecisionError")


def test_deferrals_do_not_use_attempts_up(
    saver: DurablePostgresSaver, runs: RunRegistry, db_dsn: str
) -> None:
    calls: list[int] = []

    @effect(name=f"rate-limited-{uuid.uuid4().hex[:6]}")
    def call() -> str:
        calls.append(1)
        if len(calls) <= 3:
            raise RetryLater(3600)
        return "done"

    graph = one_node(saver, lambda s: {"answer": call()})
    run = runs.create(graph, {"log": []}, max_attempts=1)
    worker = Worker(saver, [graph])
    for _ in range(3):
        (done,) = worker.run_until_idle()
        assert (done.status, done.attempt) == (RunStatus.DEFERRED, 0)
        with psycopg.connect(db_dsn, autocommit=True) as conn:  # its retry time has come
            conn.execute(
                "UPDATE langgraph_durable_effects SET next_attempt_at = now() WHERE thread_id = %s",
                (run.thread_id,),
            )
            conn.execute(
                "UPDATE langgraph_durable_runs SET retry_at = now() WHERE run_id = %s",
                (run.run_id,),
            )
    (done,) = worker.run_until_idle()
    assert (done.status, done.attempt, runs.output_of(done)["answer"]) == (
        RunStatus.SUCCESS,
        1,
        "done",
    )


def test_a_deferred_run_blocked_meanwhile_still_waits_for_its_time(
    saver: DurablePostgresSaver, runs: RunRegistry, db_dsn: str
) -> None:
    graph = one_node(saver, lambda s: {"log": ["a"]})
    run = runs.create(graph, {"log": []})
    with psycopg.connect(db_dsn, autocommit=True) as conn:  # deferred an hour, then blocked
        conn.execute(
            "UPDATE langgraph_durable_runs SET status = 'blocked', retry_at = now() + "
            "interval '1 hour', status_reason = 'version: no live worker' WHERE run_id = %s",
            (run.run_id,),
        )
    worker = Worker(saver, [graph])
    assert worker.run_until_idle() == []  # a worker of its version came, but not its time
    with psycopg.connect(db_dsn, autocommit=True) as conn:
        conn.execute(
            "UPDATE langgraph_durable_runs SET retry_at = now() WHERE run_id = %s", (run.run_id,)
        )
    (done,) = worker.run_until_idle()
    assert done.status is RunStatus.SUCCESS


def test_a_worker_is_live_within_the_window_it_announced(
    saver: DurablePostgresSaver, runs: RunRegistry, db_dsn: str
) -> None:
    graph = one_node(saver, lambda s: {"log": ["a"]})
    newer = runs.create(graph, {"log": []}, version="2")
    slow = [{"name": graph.name, "version": "2", "versions": ["2"], "live_seconds": 600.0}]
    with psycopg.connect(db_dsn, autocommit=True) as conn:
        # A worker of version 2 with a long lease: its last heartbeat a minute ago.
        conn.execute(
            "INSERT INTO langgraph_durable_workers (worker_id, owner, graphs, heartbeat_at) "
            "VALUES (%s, 'elsewhere', %s::jsonb, now() - interval '60 seconds')",
            (f"slow-{uuid.uuid4().hex[:6]}", json.dumps(slow)),
        )
    quick = Worker(saver, [graph], lease_seconds=2, idle_wait=1)  # live within 6 s itself
    assert quick.run_until_idle() == []
    # The version 2 worker is live by its own window: the run waits for it, not blocked.
    assert runs.get(newer.run_id).status is RunStatus.PENDING


@pytest.mark.parametrize("cannot_take", ["another version's", "its thread held"])
def test_an_idle_worker_does_not_poll_for_a_run_it_cannot_take(
    saver: DurablePostgresSaver,
    runs: RunRegistry,
    db_dsn: str,
    monkeypatch: pytest.MonkeyPatch,
    cannot_take: str,
) -> None:
    """A run asleep past its wake time that this worker cannot take (a version it lacks, so
    blocked; or one whose thread a plain invoke holds) made `runs_next_due` say "due now"
    for ever: the idle worker looked again every 10 ms, about 200 transactions a second.
    Counted over a fixed number of idle loops (its waits return at once): the worker's
    transactions per second of the waits it asked for."""
    v1 = one_node(saver, lambda s: {"log": ["a"]})
    v2 = GraphVersion(v1.name, "2", v1.graph)
    run = runs.create(v1 if cannot_take == "another version's" else v2, {"log": []})
    with psycopg.connect(db_dsn, autocommit=True) as conn:  # asleep, its wake time past
        conn.execute(
            "UPDATE langgraph_durable_runs SET status = 'deferred', "
            "retry_at = now() - interval '1 second' WHERE run_id = %s",
            (run.run_id,),
        )
    worker = Worker(saver, [v2], lease_seconds=30, idle_wait=5)
    transactions, waits = [0], []
    for name in ("sweep", "claim", "seconds_to_next_due"):  # one transaction each

        def counted(*args: Any, _call: Any = getattr(worker.registry, name), **kw: Any) -> Any:
            transactions[0] += 1
            return _call(*args, **kw)

        monkeypatch.setattr(worker.registry, name, counted)

    def wait(conn: Any, seconds: float) -> None:  # returns at once: loops, not time
        waits.append(seconds)
        if len(waits) == 20:
            worker.stop()

    monkeypatch.setattr(worker.registry, "wait_wakeup", wait)
    if cannot_take == "its thread held":
        with runs.exclusive(run.thread_id):
            worker.run_forever(handle_sigterm=False)
    else:
        worker.run_forever(handle_sigterm=False)
        assert runs.get(run.run_id).status is RunStatus.BLOCKED  # by the worker's sweep
    assert len(waits) == 20
    per_second = transactions[0] / sum(waits)
    assert per_second < 1.0, f"{transactions[0]} transactions in {sum(waits):.2f} s of waits"
    runs.cancel(run.run_id)


@pytest.mark.parametrize("key", ["checkpoint_id", "checkpoint_ns", "checkpoint_map"])
def test_a_run_cannot_be_pinned_to_a_checkpoint(
    saver: DurablePostgresSaver, runs: RunRegistry, key: str
) -> None:
    graph = one_node(saver, lambda s: {"log": ["a"]})
    with pytest.raises(InvalidInputError, match=f"config sets {key}.*forking|fork"):
        runs.create(graph, {"log": []}, config={"configurable": {key: "1ef0"}})
    assert runs.list(graph_name=graph.name) == []


def test_bad_registry_input_is_a_named_error(
    saver: DurablePostgresSaver, runs: RunRegistry
) -> None:
    graph = one_node(saver, lambda s: {"log": ["a"]})
    run = runs.create(graph, {"log": []}, run_id=f"r-{uuid.uuid4().hex}")
    with pytest.raises(RunConflictError, match="exists already"):
        runs.create(graph, {"log": []}, run_id=run.run_id)
    assert [r.run_id for r in runs.list(graph_name=graph.name)] == [run.run_id]

    for bad in ("a\x00b", "\ud800"):
        with pytest.raises(InvalidThreadIdError):
            runs.get(bad)
        with pytest.raises(InvalidThreadIdError):
            runs.cancel(bad)
        with pytest.raises(InvalidThreadIdError):
            runs.wait_for(bad, timeout=0)
        with pytest.raises(InvalidThreadIdError):
            runs.list(thread_id=bad)
        with pytest.raises(InvalidThreadIdError):
            runs.create(graph, {"log": []}, run_id=bad)
    with pytest.raises(InvalidThreadIdError, match="at most 1,024"), runs.exclusive("t" * 5000):
        pass
    with pytest.raises(InvalidInputError, match="limit"):
        runs.list(limit=-1)
    with pytest.raises(InvalidInputError, match="limit"):
        runs.stuck(limit=-1)
    with pytest.raises(InvalidInputError, match="status='nope'"):
        runs.list(status="nope")
    with pytest.raises(InvalidInputError, match="graph_name"):
        runs.list(graph_name="a\x00")
    with pytest.raises(InvalidInputError, match="version"):
        runs.migrate(run.run_id, 2)  # type: ignore[arg-type]
    assert runs.get(run.run_id).status is RunStatus.PENDING


def test_runs_queued_behind_others_do_not_hide_a_sleeping_runs_wake_up(fresh_db_dsn: str) -> None:
    """`runs_next_due` judges the threads of the runs due first only; pending runs queued
    behind running ones (no time of their own) filled those places, and a sleeping run's
    wake-up was never seen: the idle worker slept `idle_wait` past it."""
    with DurablePostgresSaver.from_conn_string(fresh_db_dsn) as saver:
        saver.setup()
        graph = GraphVersion("g", "1", linear_graph(("a",)).compile(checkpointer=saver))
        with psycopg.connect(fresh_db_dsn, autocommit=True) as conn:
            for i in range(70):
                conn.execute(
                    "INSERT INTO langgraph_durable_threads (thread_id, owner, run_id, "
                    "lease_expires_at) VALUES (%s, 'w', %s, now() + interval '1 day')",
                    (f"busy-{i}", f"running-{i}"),
                )
                conn.execute(
                    "INSERT INTO langgraph_durable_runs (run_id, thread_id, graph_name, "
                    "graph_version, status, owner, lease_expires_at, attempt) VALUES "
                    "(%s, %s, 'g', '1', 'running', 'w', now() + interval '1 day', 1), "
                    "(%s, %s, 'g', '1', 'pending', NULL, NULL, 0)",
                    (f"running-{i}", f"busy-{i}", f"queued-{i}", f"busy-{i}"),
                )
            conn.execute("INSERT INTO langgraph_durable_threads (thread_id) VALUES ('sleeper')")
            conn.execute(
                "INSERT INTO langgraph_durable_runs (run_id, thread_id, graph_name, "
                "graph_version, status, retry_at) VALUES "
                "('asleep', 'sleeper', 'g', '1', 'deferred', now() + interval '1 hour')"
            )
        due = RunRegistry(saver).seconds_to_next_due([graph])
    assert due is not None
    assert 3000 < due <= 3600  # the sleeper's wake-up, not the leases a day away


def test_run_forever_keeps_no_finished_run_while_the_queue_stays_full(
    saver: DurablePostgresSaver, runs: RunRegistry
) -> None:
    """A worker whose queue never empties held every run it finished (each with its
    stored input and output) until a claim found nothing: hours of a backlog's runs."""
    total = 8
    alive_at_last: list[int] = []
    worker: Worker

    def step(state: State) -> dict[str, Any]:
        last = len(state["log"]) + 1 == total
        stopping = last
        try:
            if not last:  # the next run is queued before this one finishes
                stopping = True  # until it is: if this step fails, no next run comes
                runs.create(version, {"log": state["log"] + ["x"]})
                stopping = False
            else:
                gc.collect()
                mine = (o for o in gc.get_objects() if type(o) is Run)
                alive_at_last.append(sum(1 for o in mine if o.finished and o.graph_name == name))
        finally:
            if stopping:
                worker.stop()
        return {"answer": "a" * 10_000}

    version = one_node(saver, step)
    name = version.name
    runs.create(version, {"log": []})
    worker = Worker(saver, [version], lease_seconds=30, idle_wait=5)
    worker.run_forever(handle_sigterm=False)
    assert alive_at_last == [0]
