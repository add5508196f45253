"""A worker killed between a version's migration hook and recording the new version.

The hook had written the thread's state (`update_state`); the run was still at the old
version, so the next worker ran the hook again on top of its checkpoints: the state was
migrated twice. Once the hook returns, the worker now writes a checkpoint that marks the
migration done (`runs/_model.py` `migration_done`); the next worker that finds it as the
thread's latest records the version without running the hook again. A worker killed
inside the hook leaves no mark, and the hook runs again from its start.

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


@pytest.mark.parametrize(
    ("point", "hook_runs", "log"),
    [
        # Killed after the hook: the next worker finds the migration marked done.
        ("run:after_migration_hook", 1, ["migrated", "migrated again", "input", "a"]),
        # Killed inside it: no mark, so the hook runs again from its start, and its
        # second update is applied (it was taken for done and skipped).
        (
            "test:between_migration_updates",
            2,
            ["migrated", "migrated", "migrated again", "input", "a"],
        ),
    ],
)
def test_a_migration_hook_is_done_once_it_returned_and_never_half_done(
    runs: RunRegistry, db_dsn: str, point: str, hook_runs: int, log: list[str]
) -> None:
    name = f"migrate-{uuid.uuid4().hex[:8]}"
    run = runs.create(name, {"log": ["input"]}, version="1")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    crashing = {**env, "LANGGRAPH_DURABLE_CRASH_AT": point}
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
    assert runs.output_of(done)["log"] == log
    with psycopg.connect(db_dsn, autocommit=True) as conn:
        calls = conn.execute(
            "SELECT count(*) FROM migration_calls WHERE thread_id = %s", (run.thread_id,)
        ).fetchone()
    assert calls == (hook_runs,)
