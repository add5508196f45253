"""Workers SIGKILLed at named points, resumed by another process; the outside world counts.

What each durability mode loses in a crash, as documented in the README:

- "sync": nothing that finished: every node whose step committed before the kill runs
  once; a node that finished while its step's commit was still on its way runs again.
- "async": the run resumes from the last checkpoint that reached the database; nodes after
  it run again (with a local server that is usually none or the last one).
- "exit": everything since the run started: nothing was saved, `invoke(None)` raises
  `EmptyInputError`, and the input must be sent again.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid
from collections import Counter
from pathlib import Path

import psycopg
import pytest

from langgraph_durable import DurablePostgresSaver

WORKER = Path(__file__).with_name("worker.py")
ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.crash


def run_worker(
    dsn: str,
    thread: str,
    mode: str,
    flavor: str,
    *,
    resume: bool = False,
    kill_in: str | None = None,
    crash_at: str | None = None,
    crash_after: int = 0,
    threads: int = 0,
    connections: int = 10,
) -> int:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LANGGRAPH_DURABLE_CRASH")}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    if crash_at:
        env["LANGGRAPH_DURABLE_CRASH_AT"] = crash_at
        env["LANGGRAPH_DURABLE_CRASH_AFTER"] = str(crash_after)
    cmd = [sys.executable, str(WORKER), dsn, thread, mode, flavor]
    if resume:
        cmd.append("--resume")
    if kill_in:
        cmd += ["--kill-in", kill_in]
    if threads:
        cmd += ["--threads", str(threads), "--connections", str(connections)]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    if done.returncode not in (0, 3, -signal.SIGKILL):
        raise AssertionError(f"worker failed ({done.returncode}):\n{done.stderr}")
    return done.returncode


def runs(dsn: str, thread: str) -> Counter[str]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT node FROM crash_node_runs WHERE thread_id = %s", (thread,)
        ).fetchall()
    return Counter(r[0] for r in rows)


FLAVORS = ["sync", "async"]


@pytest.mark.parametrize("flavor", FLAVORS)
def test_sync_mode_kill_mid_node_reruns_only_that_node(db_dsn: str, flavor: str) -> None:
    thread = f"crash-{uuid.uuid4()}"
    assert run_worker(db_dsn, thread, "sync", flavor, kill_in="n4") == -signal.SIGKILL
    assert run_worker(db_dsn, thread, "sync", flavor, resume=True) == 0
    assert runs(db_dsn, thread) == Counter(
        {"n1": 1, "n2": 1, "p1": 1, "p2": 1, "n3": 1, "n4": 2, "n5": 1}
    )


@pytest.mark.parametrize("flavor", FLAVORS)
@pytest.mark.parametrize("after", [1, 2, 3, 4])
def test_sync_mode_kill_right_after_a_checkpoint_commit_reruns_nothing(
    db_dsn: str, flavor: str, after: int
) -> None:
    """Killed just after the n-th checkpoint committed: every node that finished ran once."""
    thread = f"crash-{uuid.uuid4()}"
    code = run_worker(
        db_dsn, thread, "sync", flavor, crash_at="put:after_commit", crash_after=after
    )
    assert code == -signal.SIGKILL
    before = runs(db_dsn, thread)
    assert run_worker(db_dsn, thread, "sync", flavor, resume=True) == 0
    after_resume = runs(db_dsn, thread)
    assert set(after_resume) == {"n1", "n2", "p1", "p2", "n3", "n4", "n5"}
    assert all(count == 1 for count in after_resume.values()), (before, after_resume)


@pytest.mark.parametrize("flavor", FLAVORS)
@pytest.mark.parametrize(("after", "node"), [(1, "n1"), (2, "n2"), (5, "n3")])  # 0: __start__
def test_sync_mode_kill_while_a_steps_writes_wait_for_its_checkpoint(
    db_dsn: str, flavor: str, after: int, node: str
) -> None:
    """Killed after `node` finished, while its writes were parked for the checkpoint that
    commits them: that step was not committed, so only `node` runs again."""
    thread = f"crash-{uuid.uuid4()}"
    code = run_worker(
        db_dsn, thread, "sync", flavor, crash_at="put_writes:parked", crash_after=after
    )
    assert code == -signal.SIGKILL
    assert run_worker(db_dsn, thread, "sync", flavor, resume=True) == 0
    expected = Counter({name: 1 for name in ("n1", "n2", "p1", "p2", "n3", "n4", "n5")})
    expected[node] = 2
    assert runs(db_dsn, thread) == expected


@pytest.mark.parametrize("flavor", FLAVORS)
def test_sync_mode_parallel_task_writes_survive_the_other_task_dying(
    db_dsn: str, flavor: str
) -> None:
    """p1 finished and its writes committed; p2 dies mid-run. Only p2 runs again."""
    thread = f"crash-{uuid.uuid4()}"
    code = run_worker(db_dsn, thread, "sync", flavor, kill_in="p2-after-p1-writes")
    assert code == -signal.SIGKILL
    assert run_worker(db_dsn, thread, "sync", flavor, resume=True) == 0
    assert runs(db_dsn, thread) == Counter(
        {"n1": 1, "n2": 1, "p1": 1, "p2": 2, "n3": 1, "n4": 1, "n5": 1}
    )


def committed_log(dsn: str, thread: str) -> list[str]:
    """The nodes whose steps the thread's latest checkpoint holds (its `log` channel)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(
            "SELECT checkpoint FROM checkpoints WHERE thread_id = %s"
            " ORDER BY checkpoint_id DESC LIMIT 1",
            (thread,),
        ).fetchone()
    if row is None:
        return []
    log = row[0]["channel_values"].get("log")
    if log is None:  # stored as a blob: read it through a saver
        with DurablePostgresSaver.from_conn_string(dsn) as saver:
            found = saver.get_tuple({"configurable": {"thread_id": thread}})
        assert found is not None
        log = found.checkpoint["channel_values"].get("log", [])
    return list(log)


@pytest.mark.parametrize("flavor", FLAVORS)
@pytest.mark.parametrize("after", [1, 3, 6])  # each run saves 8 checkpoints: >= 8 statements
def test_sync_mode_runs_sharing_statements_lose_nothing_committed(
    db_dsn: str, flavor: str, after: int
) -> None:
    """Six runs on one connection: their puts wait for it and go together in one statement.
    Killed right after the n-th statement committed; another process resumes every run
    (sending the input again to a run that saved nothing). In each run, every node its
    latest checkpoint holds ran exactly once; nodes after it ran at most twice; every run
    finishes."""
    prefix = f"crash-{uuid.uuid4()}"
    threads = [f"{prefix}-{i}" for i in range(6)]
    code = run_worker(
        db_dsn,
        prefix,
        "sync",
        flavor,
        crash_at="put:after_commit",
        crash_after=after,
        threads=len(threads),
        connections=1,
    )
    assert code == -signal.SIGKILL
    committed = {thread: committed_log(db_dsn, thread) for thread in threads}
    assert run_worker(db_dsn, prefix, "sync", flavor, resume=True, threads=len(threads)) == 0
    for thread in threads:
        counts = runs(db_dsn, thread)
        assert set(counts) == {"n1", "n2", "p1", "p2", "n3", "n4", "n5"}, thread
        assert all(counts[node] == 1 for node in committed[thread]), (committed, counts)
        assert all(count <= 2 for count in counts.values()), counts
        assert committed_log(db_dsn, thread).count("n5") == 1
    if flavor == "sync":
        return  # whether threads meet at the connection depends on timing
    with psycopg.connect(db_dsn, autocommit=True) as conn:
        row = conn.execute(
            "SELECT max(n) FROM (SELECT count(DISTINCT thread_id) AS n FROM checkpoints"
            " WHERE thread_id LIKE %s GROUP BY xmin::text) AS shared",
            (f"{prefix}-%",),
        ).fetchone()
    assert row is not None
    assert row[0] > 1  # runs waiting for the one connection went together


@pytest.mark.parametrize("flavor", FLAVORS)
def test_exit_mode_loses_the_whole_run(db_dsn: str, flavor: str) -> None:
    thread = f"crash-{uuid.uuid4()}"
    assert run_worker(db_dsn, thread, "exit", flavor, kill_in="n4") == -signal.SIGKILL
    # Nothing was saved: resuming without input is refused...
    assert run_worker(db_dsn, thread, "exit", flavor, resume=True) == 3
    # ...and sending the input again re-runs everything before the kill.
    assert run_worker(db_dsn, thread, "exit", flavor) == 0
    assert runs(db_dsn, thread) == Counter(
        {"n1": 2, "n2": 2, "p1": 2, "p2": 2, "n3": 2, "n4": 2, "n5": 1}
    )


@pytest.mark.parametrize("flavor", FLAVORS)
def test_async_mode_resumes_from_the_last_saved_checkpoint(db_dsn: str, flavor: str) -> None:
    thread = f"crash-{uuid.uuid4()}"
    assert run_worker(db_dsn, thread, "async", flavor, kill_in="n4") == -signal.SIGKILL
    assert run_worker(db_dsn, thread, "async", flavor, resume=True) == 0
    seen = runs(db_dsn, thread)
    assert set(seen) == {"n1", "n2", "p1", "p2", "n3", "n4", "n5"}
    # What ran twice is a suffix of the run: the steps whose saves were still in flight.
    order = ["n1", "n2", "p1", "n3", "n4"]
    twice = [n for n in order if seen[n] == 2]
    assert twice == order[len(order) - len(twice) :], seen
    assert seen["n4"] == 2
    assert seen["n5"] == 1
    assert all(count <= 2 for count in seen.values())
