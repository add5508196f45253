"""Crash and resume, for real: a worker is SIGKILLed mid-run and another process finishes.

    python examples/crash_resume_demo.py              # embedded Postgres, nothing to set up
    LANGGRAPH_DURABLE_DSN=postgresql://... python examples/crash_resume_demo.py

A five-step workflow runs in a worker process under `durability="sync"`. When step 3 has
started, this process kills the worker with SIGKILL (no cleanup, like an OOM kill or a
power cut). A second worker process resumes the thread from Postgres. Every step records
which process ran it in a table outside the graph, so the report shows what the outside
world saw: steps finished before the kill ran once; only the step that was cut off ran again.
"""

from __future__ import annotations

import operator
import os
import signal
import subprocess
import sys
import time
import uuid
from typing import Annotated, Any

import psycopg
from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict

from langgraph_durable import DurablePostgresSaver
from langgraph_durable.embedded import DSN_ENV_VAR, demo_database, demo_note

STEPS = ["fetch_order", "check_rules", "draft_reply", "review_reply", "send_summary"]
SLOW_STEP = "draft_reply"


class State(TypedDict, total=False):
    done: Annotated[list[str], operator.add]


def _record(dsn: str, thread: str, step: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO demo_step_runs (thread_id, step, pid) VALUES (%s, %s, %s)",
            (thread, step, os.getpid()),
        )


def worker(dsn: str, thread: str) -> None:
    """Run (or resume) the workflow on `thread` until it finishes."""

    config: Any = {"configurable": {"thread_id": thread}}
    with DurablePostgresSaver.from_conn_string(dsn) as saver:
        stopped = _workflow(dsn, thread, slow=False).compile(checkpointer=saver)
        state = stopped.get_state(config)
        if state.created_at is not None and not state.tasks:  # it finished: do not run again
            return
        resuming = bool(state.tasks)  # stopped mid-run: go on from there
        graph = _workflow(dsn, thread, slow=not resuming).compile(checkpointer=saver)
        graph.invoke(None if resuming else {"done": []}, config, durability="sync")


def _workflow(dsn: str, thread: str, *, slow: bool) -> StateGraph[Any, Any, Any, Any]:
    def make(step: str) -> Any:
        def run(state: State) -> dict[str, Any]:
            _record(dsn, thread, step)
            if slow and step == SLOW_STEP:
                time.sleep(60)  # long enough for the demo to kill the worker here
            return {"done": [step]}

        return run

    builder = StateGraph(State)
    previous = START
    for step in STEPS:
        builder.add_node(step, make(step))
        builder.add_edge(previous, step)
        previous = step
    builder.add_edge(previous, END)
    return builder


def _wait_for_step(dsn: str, thread: str, step: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    with psycopg.connect(dsn, autocommit=True) as conn:
        while time.monotonic() < deadline:
            query = "SELECT 1 FROM demo_step_runs WHERE thread_id = %s AND step = %s"
            if conn.execute(query, (thread, step)).fetchone():
                return
            time.sleep(0.05)
    raise TimeoutError(f"step {step} never started")


def main() -> int:
    dsn, embedded = demo_database()
    try:
        with DurablePostgresSaver.from_conn_string(dsn) as saver:
            saver.setup()
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(
                "CREATE TABLE IF NOT EXISTS demo_step_runs (thread_id TEXT, step TEXT, "
                "pid INT, at TIMESTAMPTZ DEFAULT clock_timestamp())"
            )
        thread = f"demo-{uuid.uuid4().hex[:8]}"
        print(demo_note(embedded))
        print(f"thread {thread} on {'embedded Postgres' if embedded else 'your Postgres'}")
        cmd = [sys.executable, __file__, "--worker", thread]  # DSN: from the env
        first = subprocess.Popen(cmd)
        _wait_for_step(dsn, thread, SLOW_STEP)
        os.kill(first.pid, signal.SIGKILL)
        first.wait()
        print(f"worker {first.pid} killed with SIGKILL during {SLOW_STEP}")
        second = subprocess.run(cmd, check=True)
        print(f"a new worker resumed the thread (exit code {second.returncode})")
        with psycopg.connect(dsn, autocommit=True) as conn:
            rows = conn.execute(
                "SELECT step, pid FROM demo_step_runs WHERE thread_id = %s ORDER BY at",
                (thread,),
            ).fetchall()
        print("\nstep            runs  processes")
        for step in STEPS:
            pids = [str(pid) for s, pid in rows if s == step]
            print(f"{step:<15} {len(pids):>4}  {', '.join(pids)}")
        twice = [s for s in STEPS if sum(1 for r in rows if r[0] == s) > 1]
        finished_before_kill = STEPS[: STEPS.index(SLOW_STEP)]
        ok = all(sum(1 for r in rows if r[0] == s) == 1 for s in finished_before_kill)
        ok = ok and twice == [SLOW_STEP] and len(rows) == len(STEPS) + 1
        print(
            f"\nsteps finished before the kill ran once: {'yes' if ok else 'NO'}; "
            f"re-run: {', '.join(twice) or 'none'} (cut off mid-step)"
        )
        return 0 if ok else 1
    finally:
        if embedded is not None:
            embedded.stop()


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--worker":
        worker(os.environ[DSN_ENV_VAR], sys.argv[2])  # set by the parent's demo_database()
        sys.exit(0)
    sys.exit(main())
