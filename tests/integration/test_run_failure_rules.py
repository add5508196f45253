"""How a run's failures are judged, on a real database: whose outage, whose stop, what ends it.

- Only our own database going away gives a run its attempt back: an error raised on a
  connection langgraph-durable lent. A node whose own connection dies has failed, and a run
  that keeps failing so ends as `error` instead of being retried forever.
- A `BaseException` gives the attempt back only when the stop came from outside (the
  worker's `stop()`, Ctrl-C, a cancellation of the worker's task). A node's `sys.exit()` or
  a stray `CancelledError` uses an attempt up, so it cannot make a crash loop.
- A run whose worker died in its last attempt keeps the error an earlier attempt recorded.
- Sweeps skip rows other sessions hold, so two sweeps (or a sweep and a registry change)
  never wait on each other.
- `wait_for` on a saver with one connection does not hold it: a worker in the same process
  can finish the run meanwhile.
- Leaving `exclusive()` wakes the workers when a run of the thread waited for it.
- Every bad argument is a named error before anything is written.
"""

from __future__ import annotations

import asyncio
import logging
import math
import sys
import threading
import time
import uuid
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import psycopg
import pytest
from langgraph.graph import END, START, StateGraph
from psycopg.rows import dict_row
from typing_extensions import TypedDict

from langgraph_durable import (
    AsyncDurablePostgresSaver,
    AsyncRunRegistry,
    AsyncWorker,
    ConnectionLostError,
    DurablePostgresSaver,
    GraphVersion,
    InvalidInputError,
    LockTimeoutError,
    RunRegistry,
    RunStatus,
    TransactionConflictError,
    Worker,
    _crashpoints,
)
from langgraph_durable._db import connections, source_of
from langgraph_durable.errors import translate_driver_error
from langgraph_durable.runs._model import is_outage, outcome_of


class State(TypedDict, total=False):
    log: list[str]


def one_node(saver: Any, fn: Callable[..., Any], **options: Any) -> GraphVersion:
    builder = StateGraph(State)
    builder.add_node("only", fn)
    builder.add_edge(START, "only")
    builder.add_edge("only", END)
    name = f"g-{uuid.uuid4().hex[:8]}"
    return GraphVersion(name, "1", builder.compile(checkpointer=saver), **options)


def make_due(dsn: str, run_id: str) -> None:
    """A retried run's pause is over (the test does not wait out the backoff)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            "UPDATE langgraph_durable_runs SET retry_at = clock_timestamp() WHERE run_id = %s",
            (run_id,),
        )


def run_row(dsn: str, run_id: str) -> dict[str, Any]:
    with psycopg.connect(dsn, autocommit=True, row_factory=dict_row) as conn:
        row = conn.execute(
            "SELECT * FROM langgraph_durable_runs WHERE run_id = %s", (run_id,)
        ).fetchone()
    assert row is not None
    return row


def killed_own_connection(dsn: str) -> psycopg.OperationalError:
    """A real 'terminating connection' error (57P01), raised on a connection of our own."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        try:
            conn.execute("SELECT pg_terminate_backend(pg_backend_pid())")
        except psycopg.OperationalError as exc:
            return exc
    raise AssertionError("the server did not end the session")


# -- whose outage ---------------------------------------------------------------------------


def test_only_errors_on_our_connections_count_as_an_outage(
    saver: DurablePostgresSaver, db_dsn: str
) -> None:
    theirs = killed_own_connection(db_dsn)
    assert not is_outage(theirs)

    source = source_of(saver)
    assert source is not None
    ours: BaseException | None = None
    try:
        with source.connection("a test") as conn:
            conn.execute("SELECT pg_terminate_backend(pg_backend_pid())")
    except ConnectionLostError as exc:
        ours = exc
    assert ours is not None
    assert isinstance(ours.__cause__, psycopg.OperationalError)
    assert is_outage(ours)


def _terminate(db_dsn: str, pids: str = "") -> None:
    """End the database's client sessions (all but the admin's, or `pids`) and wait until
    they are gone (database state)."""
    name = psycopg.conninfo.conninfo_to_dict(db_dsn)["dbname"]
    with psycopg.connect(db_dsn, autocommit=True) as admin:
        others = (
            "FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()"
            " AND backend_type = 'client backend'"
        )
        if pids:
            others += f" AND pid IN ({pids})"
        admin.execute(f"SELECT pg_terminate_backend(pid) {others}", (name,))
        while admin.execute(f"SELECT count(*) {others}", (name,)).fetchone() != (0,):
            time.sleep(0.01)  # waits for the sessions to be gone (database state)


def test_idle_connections_the_server_ended_are_not_lent(
    saver: DurablePostgresSaver, runs: RunRegistry, db_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The server ends every idle session of the pool (what a restart does to them): the
    pool's check sees it when lending and lends a live connection instead. Before, the
    call that drew a dead one got a raw psycopg AdminShutdown (found by the crash matrix).
    A restart takes longer than `CHECK_IDLE_AFTER` (50 ms); here the sessions end at once,
    so every connection counts as idle long enough (0 s)."""
    monkeypatch.setattr(connections, "CHECK_IDLE_AFTER", 0.0)
    graph = one_node(saver, lambda state: {"log": ["ran"]})
    runs.create(graph, {"log": []})  # pooled connections have been used, and are idle now
    _terminate(db_dsn)
    run = runs.create(graph, {"log": []})
    assert runs.get(run.run_id).status is RunStatus.PENDING
    assert saver.get_tuple({"configurable": {"thread_id": run.thread_id}}) is None


def test_a_connection_given_back_within_the_idle_limit_is_lent_unchecked(
    db_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A session ended within `CHECK_IDLE_AFTER` of its connection's last call is lent
    without the check (its `select()` cost each sync step 2.5-4%): that call fails by name,
    the pool checks its other connections, and the next call gets a live one. The limit
    is raised for the test (50 ms by default), which must not depend on its own speed."""
    monkeypatch.setattr(connections, "CHECK_IDLE_AFTER", 3600.0)
    with DurablePostgresSaver.from_conn_string(db_dsn, max_connections=1) as saver:
        source = source_of(saver)
        assert source is not None
        with source.connection("a test") as conn:
            pid = conn.info.backend_pid
        _terminate(db_dsn, str(int(pid)))
        with (
            pytest.raises(ConnectionLostError, match="a second test"),
            source.connection("a second test") as conn,
        ):
            conn.execute("SELECT 1")
        with source.connection("a third test") as conn:
            assert conn.execute("SELECT 1").fetchone() is not None
        assert saver.get_tuple({"configurable": {"thread_id": "unchecked"}}) is None


async def test_a_call_cancelled_while_a_dead_connection_closes_gives_it_back(
    db_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The pool lends a connection the server ended; the call that found it is cancelled
    while closing it. The pool must not count it as lent: with one connection, a leak
    would leave every later call waiting until the pool's timeout."""
    monkeypatch.setattr(connections, "CHECK_IDLE_AFTER", 0.0)
    async with AsyncDurablePostgresSaver.from_conn_string(
        db_dsn, max_connections=1, pool_timeout=10
    ) as saver:
        source = source_of(saver)
        assert source is not None
        async with source.connection("a test") as conn:
            dead = conn
        _terminate(db_dsn, str(int(dead.info.backend_pid)))
        close = dead.close

        async def close_then_be_cancelled() -> None:
            await close()
            raise asyncio.CancelledError

        monkeypatch.setattr(dead, "close", close_then_be_cancelled)
        with pytest.raises(asyncio.CancelledError):
            async with source.connection("a cancelled test"):
                pass
        async with source.connection("a third test") as conn:
            assert conn is not dead
            assert await (await conn.execute("SELECT 1 AS one")).fetchone() == {"one": 1}


def test_a_node_whose_own_database_fails_uses_its_attempts_up(
    saver: DurablePostgresSaver, runs: RunRegistry, db_dsn: str
) -> None:
    def node(state: State) -> State:
        raise killed_own_connection(db_dsn)

    graph = one_node(saver, node)
    run = runs.create(graph, {"log": []}, max_attempts=2)
    worker = Worker(saver, [graph])
    (first,) = worker.run_until_idle()
    assert (first.status, first.attempt, first.error_type) == (
        RunStatus.PENDING,
        1,
        "AdminShutdown",
    )
    make_due(db_dsn, run.run_id)
    (last,) = worker.run_until_idle()
    assert (last.status, last.attempt) == (RunStatus.ERROR, 2)


def test_deadlocks_and_serialization_failures_are_named_and_retried() -> None:
    for error in (psycopg.errors.DeadlockDetected(), psycopg.errors.SerializationFailure()):
        named = translate_driver_error(error, doing="finishing a run")
        assert isinstance(named, TransactionConflictError)
        assert "finishing a run" in str(named)
        assert is_outage(named)


# -- whose stop ----------------------------------------------------------------------------


def test_a_node_calling_sys_exit_counts_and_cannot_loop(
    saver: DurablePostgresSaver, runs: RunRegistry, db_dsn: str
) -> None:
    def node(state: State) -> State:
        sys.exit(3)

    graph = one_node(saver, node)
    run = runs.create(graph, {"log": []}, max_attempts=2)
    worker = Worker(saver, [graph])
    with pytest.raises(SystemExit):
        worker.run_until_idle()
    row = run_row(db_dsn, run.run_id)
    assert (row["status"], row["attempt"], row["error_type"]) == ("pending", 1, "SystemExit")
    make_due(db_dsn, run.run_id)
    with pytest.raises(SystemExit):
        Worker(saver, [graph]).run_until_idle()
    row = run_row(db_dsn, run.run_id)
    assert (row["status"], row["attempt"], row["error_type"]) == ("error", 2, "SystemExit")
    assert Worker(saver, [graph]).run_until_idle() == []


@pytest.fixture
async def asaver(db_dsn: str) -> Any:
    async with AsyncDurablePostgresSaver.from_conn_string(db_dsn) as found:
        await found.setup()
        yield found


@pytest.mark.skipif(sys.version_info < (3, 11), reason="Task.cancelling() is Python 3.11's")
async def test_a_stray_cancelled_error_counts_and_the_worker_goes_on(
    asaver: AsyncDurablePostgresSaver, db_dsn: str
) -> None:
    # LangGraph turns a node's CancelledError into NodeCancelledError (an Exception); a
    # migration hook's reaches the worker as it is.
    def hook(graph: Any, config: Any) -> None:
        raise asyncio.CancelledError()

    graph = one_node(asaver, lambda s: s, migrations={"0": hook})
    registry = AsyncRunRegistry(asaver)
    run = await registry.acreate(graph.name, {"log": []}, version="0", max_attempts=1)
    (done,) = await AsyncWorker(asaver, [graph]).arun_until_idle()
    assert (done.run_id, done.status, done.attempt) == (run.run_id, RunStatus.ERROR, 1)
    assert done.error_type == "CancelledError"


async def test_cancelling_the_worker_hands_the_run_back(
    asaver: AsyncDurablePostgresSaver, db_dsn: str
) -> None:
    started = asyncio.Event()

    async def node(state: State) -> State:
        started.set()
        await asyncio.Event().wait()  # until the worker's task is cancelled
        return state

    graph = one_node(asaver, node)
    registry = AsyncRunRegistry(asaver)
    run = await registry.acreate(graph, {"log": []}, max_attempts=1)
    task = asyncio.create_task(AsyncWorker(asaver, [graph]).arun_until_idle())
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    row = run_row(db_dsn, run.run_id)
    assert (row["status"], row["attempt"]) == ("pending", 0)


# -- what ends a crash loop ----------------------------------------------------------------


def expire_lease(dsn: str, run_id: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            "UPDATE langgraph_durable_runs SET lease_expires_at = clock_timestamp() "
            "- interval '1 second' WHERE run_id = %s",
            (run_id,),
        )


def test_a_worker_lost_in_the_last_attempt_keeps_the_earlier_error(
    saver: DurablePostgresSaver, runs: RunRegistry, db_dsn: str
) -> None:
    graph = one_node(saver, lambda s: s)
    run = runs.create(graph, {"log": []}, max_attempts=2)
    claimed = runs.claim([graph], owner="doomed", lease_seconds=60)
    assert claimed is not None
    assert runs.finish(claimed, outcome_of(claimed, error=ValueError("bad row 7")))
    make_due(db_dsn, run.run_id)
    claimed = runs.claim([graph], owner="doomed", lease_seconds=60)
    assert claimed is not None
    assert claimed.attempt == 2
    expire_lease(db_dsn, run.run_id)  # the worker died in its last attempt
    changed = runs.sweep([graph], worker_id="sweeper", live_seconds=60)
    assert [r["run_id"] for r in changed["crash_loops"]] == [run.run_id]
    ended = runs.get(run.run_id)
    assert (ended.status, ended.error_type, ended.error_message) == (
        RunStatus.ERROR,
        "ValueError",
        "bad row 7",
    )
    assert ended.status_reason is not None
    assert ended.status_reason.startswith("crash loop: its worker doomed stopped")
    assert "last allowed attempt (2 of 2)" in ended.status_reason

    alone = runs.create(graph, {"log": []}, max_attempts=1)
    claimed = runs.claim([graph], owner="doomed", lease_seconds=60)
    assert claimed is not None
    expire_lease(db_dsn, alone.run_id)
    runs.sweep([graph], worker_id="sweeper", live_seconds=60)
    ended = runs.get(alone.run_id)
    assert ended.error_type == "WorkerLost"
    assert ended.error_message is not None
    assert "last allowed attempt (1 of 1); no attempt recorded an error" in ended.error_message
    assert "each of" not in ended.error_message


# -- sweeps never wait on held rows ---------------------------------------------------------


@pytest.mark.parametrize("held", ["stuck", "unrunnable"])
def test_a_sweep_skips_runs_another_session_holds(
    saver: DurablePostgresSaver, db_dsn: str, held: str
) -> None:
    graph = one_node(saver, lambda s: s, stuck_after=timedelta(seconds=1))
    runs = RunRegistry(saver, lock_timeout=1)
    if held == "stuck":
        run = runs.create(graph, {"log": []})
        assert runs.claim([graph], owner="w", lease_seconds=600) is not None
        with psycopg.connect(db_dsn, autocommit=True) as conn:
            conn.execute(
                "UPDATE langgraph_durable_runs SET last_progress_at = clock_timestamp() "
                "- interval '1 hour' WHERE run_id = %s",
                (run.run_id,),
            )
    else:
        run = runs.create(graph.name, {"log": []}, version="0-nobody-runs")
    with psycopg.connect(db_dsn) as holder:
        holder.execute(
            "SELECT 1 FROM langgraph_durable_runs WHERE run_id = %s FOR UPDATE", (run.run_id,)
        )
        try:
            changed = runs.sweep([graph], worker_id="sweeper", live_seconds=60)
        except LockTimeoutError as exc:  # the old statements waited for the row
            pytest.fail(f"the sweep waited on a held row: {exc}")
        assert changed["stuck"] == []
        assert changed["blocked"] == []
    changed = runs.sweep([graph], worker_id="sweeper", live_seconds=60)  # released: done now
    assert [r["run_id"] for r in changed[held if held == "stuck" else "blocked"]] == [run.run_id]


# -- waiting on one connection ---------------------------------------------------------------


def test_wait_for_on_one_connection_lets_a_worker_finish_the_run(db_dsn: str) -> None:
    with psycopg.connect(db_dsn, autocommit=True, row_factory=dict_row) as conn:
        saver = DurablePostgresSaver(conn)
        saver.setup()
        graph = one_node(saver, lambda s: {"log": ["done"]})
        runs = RunRegistry(saver)
        run = runs.create(graph, {"log": []})
        worker = Worker(saver, [graph])
        errors: list[BaseException] = []

        def work() -> None:
            try:
                worker.run_until_idle()
            except BaseException as exc:
                errors.append(exc)

        waiter = threading.Thread(target=work)
        waiter.start()
        # A hang guard only: returns as soon as the run has finished.
        done = runs.wait_for(run.run_id, timeout=300)
        waiter.join()
        assert errors == []
        assert done.status is RunStatus.SUCCESS
        assert runs.output_of(done) == {"log": ["done"]}


# -- exclusive() wakes the workers ----------------------------------------------------------


def test_leaving_exclusive_wakes_workers_when_a_run_waits(
    saver: DurablePostgresSaver, runs: RunRegistry, db_dsn: str
) -> None:
    graph = one_node(saver, lambda s: s)
    thread_id = f"t-{uuid.uuid4().hex[:8]}"
    with psycopg.connect(db_dsn, autocommit=True) as listener:
        listener.execute("LISTEN langgraph_durable_runs")
        with runs.exclusive(thread_id):
            runs.create(graph, {"log": []}, thread_id=thread_id)
            created = list(listener.notifies(timeout=60, stop_after=1))
            assert len(created) == 1
        woken = list(listener.notifies(timeout=60, stop_after=1))  # a hang guard only
        assert [n.channel for n in woken] == ["langgraph_durable_runs"]


# -- arguments -----------------------------------------------------------------------------

NAN = math.nan


def run_count(dsn: str) -> int:
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute("SELECT count(*) FROM langgraph_durable_runs").fetchone()
    assert row is not None
    return int(row[0])


@pytest.fixture
def graph(saver: DurablePostgresSaver) -> GraphVersion:
    return one_node(saver, lambda s: s)


BAD_CREATES: list[tuple[dict[str, Any], str]] = [
    ({"graph": "a\x00b", "version": "1"}, "graph"),
    ({"version": "1\x00"}, "version"),
    ({"version": "\udc80"}, "version"),
    ({"config": {"configurable": {"k": "v\x00"}}}, "NUL"),
    ({"config": {"configurable": {"k\x00": "v"}}}, "NUL"),
    ({"config": {"configurable": {"k": "\ud800"}}}, "surrogate"),
    ({"metadata": {"note": "a\x00"}}, "NUL"),
    ({"metadata": {"\x00": 1}}, "NUL"),
    ({"metadata": {"x": NAN}}, "JSON"),
    ({"config": [1, 2]}, "RunnableConfig"),
    ({"config": {"configurable": [1]}}, "configurable"),
    ({"metadata": [("a", 1)]}, "metadata"),
    ({"timeout": NAN}, "timeout"),
    ({"timeout": math.inf}, "timeout"),
    ({"timeout": 1e300}, "timeout"),
    ({"timeout": "10"}, "timeout"),
    ({"max_attempts": True}, "max_attempts"),
    ({"max_attempts": 10**10}, "max_attempts"),
]


@pytest.mark.parametrize(("options", "match"), BAD_CREATES)
def test_bad_creates_are_named_before_anything_is_written(
    runs: RunRegistry, graph: GraphVersion, db_dsn: str, options: dict[str, Any], match: str
) -> None:
    target: Any = options.pop("graph", graph)
    before = run_count(db_dsn)
    with pytest.raises(InvalidInputError, match=match):
        runs.create(target, {"log": []}, **options)
    assert run_count(db_dsn) == before


def test_bad_durations_elsewhere_are_named(
    saver: DurablePostgresSaver, runs: RunRegistry, graph: GraphVersion
) -> None:
    for lease in (NAN, "x", -1, math.inf):
        with (
            pytest.raises(InvalidInputError, match="lease_seconds"),
            runs.exclusive("t-bad", lease_seconds=lease),
        ):
            pass
    with pytest.raises(InvalidInputError, match="live_seconds"):
        runs.workers(live_seconds="x")  # type: ignore[arg-type]
    run = runs.create(graph, {"log": []})
    for timeout in ("x", NAN, -5):
        with pytest.raises(InvalidInputError, match="timeout"):
            runs.wait_for(run.run_id, timeout=timeout)  # type: ignore[arg-type]
    assert runs.wait_for(run.run_id, timeout=0).status is RunStatus.PENDING
    for options, match in [
        ({"lease_seconds": NAN}, "lease_seconds"),
        ({"idle_wait": "x"}, "idle_wait"),
        ({"database_timeout": -1}, "database_timeout"),
        ({"name": "w\x00"}, "worker_id"),
    ]:
        with pytest.raises(InvalidInputError, match=match):
            Worker(saver, [graph], **options)
    with pytest.raises(InvalidInputError, match="compatible_with"):
        GraphVersion("g", "2", graph.graph, compatible_with="1.0")  # type: ignore[arg-type]


def test_a_finish_held_up_past_the_lock_timeout_is_waited_out(
    db_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The worker's own statement, the run's finish, waits longer than the saver's
    lock_timeout for the thread's row, which another session holds (as a registry change
    does): the worker tries again after a pause, as through an outage, instead of letting
    LockTimeoutError stop it with the run left running."""
    row_wanted, row_held, retried = threading.Event(), threading.Event(), threading.Event()

    class Retried(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if "does not answer while" in record.getMessage():
                retried.set()

    def before_finish(point: str) -> None:  # the run's last checkpoint is in
        row_wanted.set()
        assert row_held.wait(60)

    monkeypatch.setattr(_crashpoints, "_WANTED", frozenset({"run:before_finish"}))
    monkeypatch.setattr(_crashpoints, "_AFTER", 0)
    monkeypatch.setattr(_crashpoints, "_passes", {})
    _crashpoints.act_instead(before_finish)
    handler = Retried()
    logging.getLogger("langgraph_durable").addHandler(handler)
    found: list[Any] = []
    try:
        with DurablePostgresSaver.from_conn_string(db_dsn, lock_timeout=0.2) as saver:
            saver.setup()
            graph = one_node(saver, lambda s: {"log": ["ran"]})
            run = RunRegistry(saver).create(graph, {"log": []})
            worker = Worker(saver, [graph])

            def work() -> None:
                try:
                    found.extend(worker.run_until_idle())
                except Exception as exc:  # the old behaviour: the error escapes
                    found.append(exc)

            thread = threading.Thread(target=work, daemon=True)
            thread.start()
            assert row_wanted.wait(60)
            with psycopg.connect(db_dsn) as holder:
                holder.execute(
                    "SELECT 1 FROM langgraph_durable_threads WHERE thread_id = %s FOR UPDATE",
                    (run.thread_id,),
                )
                row_held.set()
                while not (retried.is_set() or found):
                    retried.wait(0.05)  # until the worker retried, or gave up (an event)
                holder.rollback()  # the row is free: the next try goes through
            thread.join(60)
    finally:
        _crashpoints.act_instead(None)
        logging.getLogger("langgraph_durable").removeHandler(handler)
    assert len(found) == 1, found
    assert getattr(found[0], "status", None) is RunStatus.SUCCESS, found


def test_a_statement_timeout_of_the_worker_s_own_statements_is_waited_out(db_dsn: str) -> None:
    """With `statement_timeout` set and no `lock_timeout`, a table lock (a migration, a
    `LOCK TABLE`) makes the worker's sweep time out: the worker waits it out as it does a
    lock timeout, instead of `run_forever` stopping at once (and with it every worker)."""
    retried = threading.Event()

    class Retried(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if "does not answer while" in record.getMessage():
                retried.set()

    handler = Retried()
    logging.getLogger("langgraph_durable").addHandler(handler)
    errors: list[BaseException] = []
    try:
        with DurablePostgresSaver.from_conn_string(db_dsn, statement_timeout=0.2) as saver:
            saver.setup()
            graph = one_node(saver, lambda s: {"log": ["ran"]})
            worker = Worker(saver, [graph], idle_wait=0.5)

            def work() -> None:
                try:
                    worker.run_forever()
                except BaseException as exc:  # the old behaviour: StatementTimeoutError
                    errors.append(exc)
                    retried.set()

            thread = threading.Thread(target=work, daemon=True)
            with psycopg.connect(db_dsn) as holder:
                holder.execute("LOCK TABLE langgraph_durable_runs IN ACCESS EXCLUSIVE MODE")
                thread.start()
                assert retried.wait(60)  # a hang guard only: set by the first timeout
                holder.rollback()  # the table is free: the next try goes through
            assert errors == []
            runs = RunRegistry(saver)
            run = runs.create(graph, {"log": []})
            done = runs.wait_for(run.run_id, timeout=300)  # a hang guard only
            worker.stop()
            thread.join(60)
    finally:
        logging.getLogger("langgraph_durable").removeHandler(handler)
    assert errors == []
    assert not thread.is_alive()
    assert done.status is RunStatus.SUCCESS
