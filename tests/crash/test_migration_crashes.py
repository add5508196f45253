"""A worker killed between a version's migration hook and recording the new version.

The hook had written the thread's state (`update_state`); the run was still at the old
version, so the next worker ran the hook again on top of its first checkpoint: the state
was migrated twice (here: "migrated" twice in the log). The hook's checkpoint carries a
marker now (`runs/_model.py` `for_migration_hook`), and the next worker that finds it as
the thread's latest records the version without running the hook again.

Real processes: the first worker SIGKILLs itself at `run:after_migration_hook`; a second
one takes the run once its lease has run out. The test waits on the run's status, never
on a sleep.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import psycopg
import pytest

from langgraph_durable import RunRegistry, RunStatus

WORKER = Path(__file__).with_name("migration_worker.py")
ROOT = Path(__file__).resolve().parents[2]
HANG_GUARD_S = 120  # a correct run never gets near this

pytestmark = pytest.mark.crash


def test_a_migration_hook_runs_once_when_its_worker_dies_after_it(
    runs: RunRegistry, db_dsn: str
) -> None:
    name = f"migrate-{uuid.uuid4().hex[:8]}"
    run = runs.create(name, {"log": ["input"]}, version="1")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    crashing = {**env, "LANGGRAPH_DURABLE_CRASH_AT": "run:after_migration_hook"}
    first = subprocess.run(
        [sys.executable, str(WORKER), db_dsn, name],
        env=crashing,
        capture_output=True,
        text=True,
        timeout=HANG_GUARD_S,
        check=False,
    )
    assert first.returncode == -signal.SIGKILL, first.stderr
    left = runs.get(run.run_id)
    assert (left.status, left.graph_version) == (RunStatus.RUNNING, "1")
    second = subprocess.Popen(
        [sys.executable, str(WORKER), db_dsn, name],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        done = runs.wait_for(run.run_id, timeout=HANG_GUARD_S)
        second.send_signal(signal.SIGTERM)
        second.communicate(timeout=HANG_GUARD_S)
    finally:
        if second.poll() is None:
            second.kill()
            second.communicate()
    assert (done.status, done.graph_version) == (RunStatus.SUCCESS, "2"), done.status_reason
    assert runs.output_of(done)["log"] == ["migrated", "input", "a"]
    with psycopg.connect(db_dsn, autocommit=True) as conn:
        calls = conn.execute(
            "SELECT count(*) FROM migration_calls WHERE thread_id = %s", (run.thread_id,)
        ).fetchone()
    assert calls == (1,)
