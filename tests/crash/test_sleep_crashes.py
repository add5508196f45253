"""durable_sleep across real crashes: a worker killed inside the sleep's own journaled effect.

`durable_sleep` journals its wake-up time as an effect. A worker (`sleep_worker.py`) is
SIGKILLed between that effect's claim and its stored result (`effect:after_claim`: the
row is committed, nothing computed; `effect:after_call`: computed, not stored). Under the
default policy such an attempt is an unknown outcome: the resumed run was `blocked` with
`EffectOutcomeUnknown` and the journal row `unknown`, waiting for an operator, though
computing a time acts on nothing outside. What must hold: the run resumed by another
process sleeps (`deferred`, the row completed by a second attempt) and wakes when due.

The dead worker's leases run out by moving them in the database, and the wake-up time
comes by moving it, never by waiting; the dead attempt is taken over at once because its
owner process is gone (`owner_is_dead`), not after its lease.
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

from langgraph_durable import DurablePostgresSaver, Run, RunRegistry, RunStatus

HERE = Path(__file__).parent
WORKER = HERE / "sleep_worker.py"
ROOT = HERE.parents[1]
HANG_GUARD_S = 120  # a correct worker never gets near this

sys.path.insert(0, str(HERE))
try:
    import sleep_worker
finally:
    sys.path.remove(str(HERE))

pytestmark = pytest.mark.crash


def sql(dsn: str, statement: str, *params: Any) -> list[tuple[Any, ...]]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        cur = conn.execute(statement, params)
        return cur.fetchall() if cur.description else []


def sleep_row(dsn: str, thread_id: str) -> tuple[Any, ...]:
    (row,) = sql(
        dsn,
        "SELECT status, attempt FROM langgraph_durable_effects "
        "WHERE thread_id = %s AND effect_name = 'langgraph_durable.durable_sleep'",
        thread_id,
    )
    return row


def resume(dsn: str, name: str, flavour: str) -> Run:
    """Another worker (this process) takes the run."""
    if flavour == "async":
        (found,) = asyncio.run(sleep_worker.run_async(dsn, name))
    else:
        (found,) = sleep_worker.run_sync(dsn, name)
    return found


@pytest.mark.parametrize("flavour", ["sync", "async"])
@pytest.mark.parametrize("point", ["effect:after_claim", "effect:after_call"])
def test_a_worker_killed_inside_durable_sleep_leaves_a_run_that_sleeps_and_wakes(
    saver: DurablePostgresSaver, runs: RunRegistry, db_dsn: str, point: str, flavour: str
) -> None:
    name = f"sleep-crash-{uuid.uuid4().hex[:8]}"
    run = runs.create(name, {"log": []}, version="1")
    killed = subprocess.run(
        [sys.executable, str(WORKER), db_dsn, name, *(["--async"] if flavour == "async" else [])],
        env={**os.environ, "PYTHONPATH": str(ROOT), "LANGGRAPH_DURABLE_CRASH_AT": point},
        capture_output=True,
        text=True,
        timeout=HANG_GUARD_S,
        check=False,
    )
    assert killed.returncode == -signal.SIGKILL, killed.stdout + killed.stderr
    assert sleep_row(db_dsn, run.thread_id) == ("running", 1)  # died mid-attempt
    # The dead worker's leases run out (moved in the database, not waited for).
    sql(
        db_dsn,
        "UPDATE langgraph_durable_runs SET lease_expires_at = now() - interval '1s' "
        "WHERE run_id = %s",
        run.run_id,
    )
    sql(
        db_dsn,
        "UPDATE langgraph_durable_threads SET lease_expires_at = now() - interval '1s' "
        "WHERE thread_id = %s",
        run.thread_id,
    )

    asleep = resume(db_dsn, name, flavour)
    # Was blocked: EffectOutcomeUnknown, the row `unknown` until an operator resolved it.
    assert (asleep.run_id, asleep.status, asleep.error_type) == (
        run.run_id,
        RunStatus.DEFERRED,
        None,
    ), asleep.status_reason
    assert sleep_row(db_dsn, run.thread_id) == ("completed", 2)

    # The hour passes: the journaled wake-up time and the run's retry time come due.
    (now,) = sql(db_dsn, "SELECT clock_timestamp() - interval '1 second'")[0]
    sql(
        db_dsn,
        "UPDATE langgraph_durable_effects SET result_type = %s, result = %s "
        "WHERE thread_id = %s AND effect_name = 'langgraph_durable.durable_sleep'",
        *saver.serde.dumps_typed(now.isoformat()),
        run.thread_id,
    )
    sql(db_dsn, "UPDATE langgraph_durable_runs SET retry_at = now() WHERE run_id = %s", run.run_id)
    woke = resume(db_dsn, name, flavour)
    assert (woke.run_id, woke.status) == (run.run_id, RunStatus.SUCCESS), woke.error_message
    assert runs.output_of(woke) == {"log": ["woke"]}
    assert sleep_row(db_dsn, run.thread_id) == ("completed", 2)  # the wake-up time kept
