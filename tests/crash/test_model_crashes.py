"""Model calls across real crashes: a lost answer costs a bounded re-ask, never a stop.

A worker (`model_worker.py`) is SIGKILLed inside a model call, after the provider billed it
and before the answer came back. A new process resumes the thread. What the provider's
bill (`model_calls`) shows after the resume is the proof:

- default `ModelCostPolicy`: the call is asked again once, the run finishes: 2 billed calls;
- `max_reasks=0`: nothing is asked again; the run stops with `EffectOutcomeUnknown`;
- a token budget the thread has already used up stops the re-ask the same way.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import psycopg
import pytest

WORKER = Path(__file__).with_name("model_worker.py")
ROOT = Path(__file__).resolve().parents[2]
KILLED = -signal.SIGKILL
EXIT_OUTCOME_UNKNOWN = 4

pytestmark = pytest.mark.crash


def run(dsn: str, thread: str, *flags: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, str(WORKER), dsn, thread, *flags],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )


def billed(dsn: str, thread: str) -> int:
    with psycopg.connect(dsn) as conn:
        row = conn.execute("SELECT count(*) FROM model_calls WHERE thread_id = %s", (thread,))
        found = row.fetchone()
    assert found is not None
    return int(found[0])


def crash_in_the_model(dsn: str, *flags: str) -> str:
    thread = f"model-{uuid.uuid4()}"
    first = run(dsn, thread, "--kill-in-model", *flags)
    assert first.returncode == KILLED, first.stderr
    assert billed(dsn, thread) == 1
    return thread


def test_a_lost_answer_is_asked_again_and_the_run_finishes(db_dsn: str) -> None:
    thread = crash_in_the_model(db_dsn)
    resumed = run(db_dsn, thread, "--resume")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert json.loads(resumed.stdout.strip().splitlines()[-1])["answer"].startswith("Refund")
    assert billed(db_dsn, thread) == 2
    again = run(db_dsn, thread, "--resume")  # finished: nothing is asked
    assert again.returncode == 0, again.stderr
    assert billed(db_dsn, thread) == 2


def test_no_reasks_stops_the_run_without_asking_again(db_dsn: str) -> None:
    thread = crash_in_the_model(db_dsn, "--max-reasks", "0")
    resumed = run(db_dsn, thread, "--resume", "--max-reasks", "0")
    assert resumed.returncode == EXIT_OUTCOME_UNKNOWN, resumed.stdout + resumed.stderr
    assert "all 1 attempts were used" in resumed.stdout
    assert billed(db_dsn, thread) == 1


def test_a_spent_token_budget_stops_the_reask(db_dsn: str) -> None:
    thread = f"model-{uuid.uuid4()}"
    paid = run(db_dsn, thread)  # one answered call: 50 tokens in the ledger
    assert paid.returncode == 0, paid.stderr
    # A second turn on the same thread crashes in its model call.
    killed = run(db_dsn, thread, "--kill-in-model", "--new-turn")
    assert killed.returncode == KILLED, killed.stderr
    resumed = run(db_dsn, thread, "--resume", "--max-thread-tokens", "50")
    assert resumed.returncode == EXIT_OUTCOME_UNKNOWN, resumed.stdout + resumed.stderr
    assert "budget of 50" in resumed.stdout
    assert billed(db_dsn, thread) == 2
