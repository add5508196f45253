"""SIGTERM on a worker process mid-run hands the run back at once, and the process exits 0.

Python's default SIGTERM ends the process on the spot: the run stayed `running` until its
lease ran out (here 600 s) and that execution used an attempt up. `run_forever` (sync and
async) installs a handler that stops the worker and the execution under way, records the
run as handed back, and returns. A real worker process (`sigterm_worker.py`, the README's
`run_forever` with no handler of its own) is signalled while its only node waits for ever;
the test waits on the node's NOTIFY and the process's exit, never on a sleep.

In process: `run_forever` takes SIGTERM only while it has Python's default handler, leaves
a handler of the application's own alone, can be told not to (`handle_sigterm=False`), and
puts the previous handler back when it returns.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import psycopg
import pytest
from langgraph.graph import END, START, StateGraph
from psycopg.rows import dict_row
from typing_extensions import TypedDict

from langgraph_durable import DurablePostgresSaver, GraphVersion, RunRegistry, Worker, embedded

WORKER = Path(__file__).with_name("sigterm_worker.py")
ROOT = Path(__file__).resolve().parents[2]
HANG_GUARD_S = 120  # a correct run never gets near this

pytestmark = pytest.mark.crash


@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_sigterm_mid_run_hands_the_run_back_and_the_worker_exits_0(
    runs: RunRegistry, db_dsn: str, flavour: str
) -> None:
    name = f"sigterm-{uuid.uuid4().hex[:8]}"
    run = runs.create(name, {"log": []}, version="1", max_attempts=1)
    with psycopg.connect(db_dsn, autocommit=True) as listener:
        listener.execute("LISTEN sigterm_test")
        options = ["--async"] if flavour == "async" else []
        process = subprocess.Popen(
            [sys.executable, str(WORKER), db_dsn, name, *options],
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            started = [n.payload for n in listener.notifies(timeout=HANG_GUARD_S, stop_after=1)]
            assert started == [run.thread_id], process.poll()
            running = runs.get(run.run_id)
            assert (running.status.value, running.attempt) == ("running", 1)
            process.send_signal(signal.SIGTERM)
            out, err = process.communicate(timeout=HANG_GUARD_S)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
    assert process.returncode == 0, err  # was -15: killed by the default handler
    assert out.strip() == "run_forever returned"
    back = runs.get(run.run_id)
    assert (back.status.value, back.attempt, back.owner) == ("pending", 0, None)
    assert back.status_reason == "handed back: its worker stopped"
    with psycopg.connect(db_dsn, autocommit=True, row_factory=dict_row) as conn:
        thread = conn.execute(
            "SELECT owner, lease_expires_at FROM langgraph_durable_threads WHERE thread_id = %s",
            (run.thread_id,),
        ).fetchone()
    assert thread == {"owner": None, "lease_expires_at": None}  # free for the next worker


@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_sigterm_during_an_effect_call_lets_it_finish_then_hands_the_run_back(
    runs: RunRegistry, db_dsn: str, flavour: str
) -> None:
    """Stopped in the middle of an `@effect` call, the attempt was journaled `unknown`
    (the receiver may have acted), and the next worker blocked the run until a person
    resolved it: a plain deploy did what a crash does. The call now finishes, its result
    journaled, and the next worker replays it: the receiver acts once, the run succeeds."""
    name = f"sigterm-effect-{uuid.uuid4().hex[:8]}"
    run = runs.create(name, {"log": []}, version="1", max_attempts=2)
    options = ["--effect", *(["--async"] if flavour == "async" else [])]
    with psycopg.connect(db_dsn, autocommit=True) as listener:
        listener.execute("LISTEN sigterm_test")
        process = start_worker(db_dsn, name, options)
        try:
            started = [n.payload for n in listener.notifies(timeout=HANG_GUARD_S, stop_after=1)]
            assert started == [run.thread_id], process.poll()
            process.send_signal(signal.SIGTERM)
            assert process.stdout is not None
            seen = process.stdout.readline()  # the handler's line: it let the call go on
            assert seen.startswith("SIGTERM: "), seen
            assert "under way finish" in seen, seen
            listener.execute("SELECT pg_notify('sigterm_release', '')")  # the receiver acts
            out, err = process.communicate(timeout=HANG_GUARD_S)
        finally:
            stop(process)
    assert process.returncode == 0, err
    assert out.strip().endswith("run_forever returned"), out
    back = runs.get(run.run_id)
    assert (back.status.value, back.attempt) == ("pending", 0), back.status_reason
    with psycopg.connect(db_dsn, autocommit=True) as conn:
        row = conn.execute(
            "SELECT status FROM langgraph_durable_effects WHERE key = %s",
            (f"sigterm:{run.thread_id}",),
        ).fetchone()
    assert row == ("completed",)
    # The next worker replays the stored result: the receiver is not called again.
    process = start_worker(db_dsn, name, options)
    try:
        done = runs.wait_for(run.run_id, timeout=HANG_GUARD_S)
        process.send_signal(signal.SIGTERM)  # idle now: it only returns
        process.communicate(timeout=HANG_GUARD_S)
    finally:
        stop(process)
    assert done.status.value == "success", done.status_reason
    assert runs.output_of(done)["log"] == [f"sent for {run.thread_id}"]
    with psycopg.connect(db_dsn, autocommit=True) as conn:
        acted = conn.execute(
            "SELECT count(*) FROM sigterm_receiver WHERE thread_id = %s", (run.thread_id,)
        ).fetchone()
    assert acted == (1,)


@pytest.mark.parametrize("flavour", ["sync", "async", "async-sync-nodes"])
def test_sigterm_lets_parallel_branches_finish_their_calls_and_start_no_more(
    runs: RunRegistry, db_dsn: str, flavour: str
) -> None:
    """Two branches, each calling effects one after another. The async worker cancelled
    the graph only once no call was under way in the whole process, and new calls kept
    starting: both branches ran all their calls, and a grace period's SIGKILL would then
    have caught one mid-call. Now the calls under way finish and no new one starts; also
    in an async worker's sync nodes, which LangGraph runs in threads that its cancel does
    not reach (they went on starting calls)."""
    name = f"sigterm-branches-{uuid.uuid4().hex[:8]}"
    run = runs.create(name, {"log": []}, version="1", max_attempts=2)
    options = {
        "sync": ["--parallel"],
        "async": ["--parallel", "--async"],
        "async-sync-nodes": ["--parallel", "--async", "--sync-nodes"],
    }[flavour]
    with psycopg.connect(db_dsn, autocommit=True) as listener:
        listener.execute("LISTEN sigterm_test")
        process = start_worker(db_dsn, name, options)
        try:
            started = sorted(
                n.payload for n in listener.notifies(timeout=HANG_GUARD_S, stop_after=2)
            )
            assert started == [f"{run.thread_id}:left:0", f"{run.thread_id}:right:0"]
            process.send_signal(signal.SIGTERM)
            assert process.stdout is not None
            seen = process.stdout.readline()
            assert seen.startswith("SIGTERM: "), seen
            listener.execute("SELECT pg_notify('sigterm_release', '')")  # both calls act
            _, err = process.communicate(timeout=HANG_GUARD_S)
        finally:
            stop(process)
    assert process.returncode == 0, err
    back = runs.get(run.run_id)
    assert (back.status.value, back.attempt) == ("pending", 0), back.status_reason
    with psycopg.connect(db_dsn, autocommit=True) as conn:
        acted = conn.execute(
            "SELECT label FROM sigterm_receiver WHERE thread_id = %s ORDER BY label",
            (run.thread_id,),
        ).fetchall()
        journal = conn.execute(
            "SELECT status, count(*) FROM langgraph_durable_effects WHERE thread_id = %s "
            "GROUP BY status",
            (run.thread_id,),
        ).fetchall()
    assert acted == [("left:0",), ("right:0",)]  # the calls under way, and no others
    assert journal == [("completed", 2)]  # nothing claimed and left to reconcile


def test_sigterm_does_not_hang_a_sync_effect_called_on_the_event_loop(
    runs: RunRegistry, db_dsn: str
) -> None:
    """An async node awaited an effect (under way as SIGTERM came), then called a sync one
    on the loop's own thread: that call waited for the graph's cancel, which only the
    blocked loop could run, and the worker never exited."""
    name = f"sigterm-loop-{uuid.uuid4().hex[:8]}"
    run = runs.create(name, {"log": []}, version="1", max_attempts=2)
    with psycopg.connect(db_dsn, autocommit=True) as listener:
        listener.execute("LISTEN sigterm_test")
        process = start_worker(db_dsn, name, ["--async", "--loop-sync-effect"])
        try:
            started = [n.payload for n in listener.notifies(timeout=HANG_GUARD_S, stop_after=1)]
            assert started == [f"{run.thread_id}:first"]
            process.send_signal(signal.SIGTERM)
            assert process.stdout is not None
            seen = process.stdout.readline()
            assert seen.startswith("SIGTERM: "), seen
            listener.execute("SELECT pg_notify('sigterm_release', '')")
            _, err = process.communicate(timeout=HANG_GUARD_S)
        finally:
            stop(process)
    assert process.returncode == 0, err
    back = runs.get(run.run_id)
    assert (back.status.value, back.attempt) == ("pending", 0), back.status_reason
    with psycopg.connect(db_dsn, autocommit=True) as conn:
        acted = conn.execute(
            "SELECT label FROM sigterm_receiver WHERE thread_id = %s", (run.thread_id,)
        ).fetchall()
    assert acted == [("first",)]  # the second call never started


def start_worker(dsn: str, name: str, options: list[str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(WORKER), dsn, name, *options],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def stop(process: subprocess.Popen[str]) -> None:
    if process.poll() is None:
        process.kill()
        process.communicate()


class State(TypedDict, total=False):
    log: list[str]


def test_arun_forever_puts_back_the_sigterm_handler_it_took(db_dsn: str) -> None:
    """The async worker took the embedded Postgres's handler and, removing its own, left
    Python's default: a later SIGTERM skipped the exit hooks that stop the server."""
    from langgraph_durable import AsyncDurablePostgresSaver, AsyncRunRegistry, AsyncWorker

    async def main() -> Any:
        async with AsyncDurablePostgresSaver.from_conn_string(db_dsn) as saver:
            await saver.setup()
            worker: AsyncWorker | None = None

            async def node(state: State) -> State:
                assert worker is not None
                worker.stop()
                return {"log": ["ran"]}

            builder = StateGraph(State)
            builder.add_node("only", node)
            builder.add_edge(START, "only")
            builder.add_edge("only", END)
            name = f"st-{uuid.uuid4().hex[:8]}"
            graph = GraphVersion(name, "1", builder.compile(checkpointer=saver))
            await AsyncRunRegistry(saver).acreate(graph, {"log": []})
            worker = AsyncWorker(saver, [graph])
            await worker.arun_forever()
        return signal.getsignal(signal.SIGTERM)

    before = signal.signal(signal.SIGTERM, embedded._on_sigterm)
    try:
        assert asyncio.run(main()) is embedded._on_sigterm
    finally:
        signal.signal(signal.SIGTERM, before)


def test_run_forever_takes_sigterm_only_when_free_and_gives_it_back(
    saver: DurablePostgresSaver, runs: RunRegistry
) -> None:
    # Python's default, whatever an earlier test left (an embedded Postgres's handler).
    before = signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        _takes_sigterm_only_when_free(saver, runs)
    finally:
        signal.signal(signal.SIGTERM, before)


def _takes_sigterm_only_when_free(saver: DurablePostgresSaver, runs: RunRegistry) -> None:
    seen: list[Any] = []
    worker: Worker | None = None

    def node(state: State) -> State:
        seen.append(signal.getsignal(signal.SIGTERM))
        assert worker is not None
        worker.stop()  # run_forever returns once this run has finished
        return {"log": ["ran"]}

    builder = StateGraph(State)
    builder.add_node("only", node)
    builder.add_edge(START, "only")
    builder.add_edge("only", END)
    graph = GraphVersion(f"st-{uuid.uuid4().hex[:8]}", "1", builder.compile(checkpointer=saver))

    def own(signum: int, frame: Any) -> None:
        raise AssertionError("not signalled")

    for setup in ("default", "opted out", "own handler", "embedded postgres's"):
        runs.create(graph, {"log": []})
        worker = Worker(saver, [graph])
        installed = {"own handler": own, "embedded postgres's": embedded._on_sigterm}
        previous = signal.signal(signal.SIGTERM, installed[setup]) if setup in installed else None
        try:
            worker.run_forever(handle_sigterm=setup != "opted out")
            expected = installed.get(setup, signal.SIG_DFL)
            assert signal.getsignal(signal.SIGTERM) is expected
        finally:
            if previous is not None:
                signal.signal(signal.SIGTERM, previous)
    assert seen[0] not in (signal.SIG_DFL, own)
    assert callable(seen[0])
    assert seen[1:3] == [signal.SIG_DFL, own]
    # The embedded server's handler only stops the servers: the worker takes SIGTERM over
    # it, so that a demo's worker hands its run back too.
    assert callable(seen[3])
    assert seen[3] not in (signal.SIG_DFL, own, embedded._on_sigterm)
