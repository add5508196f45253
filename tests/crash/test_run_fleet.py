"""A fleet of worker processes, SIGKILLed at random points, finishes every run exactly once.

Three worker processes (`run_worker.py`) share the runs of one database. Each is started
with a random named crash point and a random number of passes before it dies (a real
SIGKILL: no cleanup). Whenever one dies, a new one takes its place. The runs of a dead
worker are taken over by the others once their lease (2 s) has run out. At the end:

- every run has succeeded;
- each receiver acted once per order: one reservation, one charge, one mail (the payment
  service and the mailer do not dedupe: only the journal and the reconcile hooks keep them
  to one);
- the time from each kill to its run being taken over is recorded and printed.

Fast mode (the suite): 12 runs. `LANGGRAPH_DURABLE_FLEET_RUNS=50` for the full proof.
`LANGGRAPH_DURABLE_FLEET_SEED` replays a seed.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import psycopg
import pytest

WORKER = Path(__file__).with_name("run_worker.py")
ROOT = Path(__file__).resolve().parents[2]
RUNS = int(os.environ.get("LANGGRAPH_DURABLE_FLEET_RUNS", "12"))
SEED = int(os.environ.get("LANGGRAPH_DURABLE_FLEET_SEED", str(random.randrange(1 << 30))))
CRASH_POINTS = [
    "run:after_claim",
    "effect:after_claim",
    "effect:after_call",
    "effect:after_result",
    "put_writes:parked",
    "put:after_commit",
    "run:before_finish",
]
HANG_GUARD_S = 600  # a correct run never gets near this

pytestmark = pytest.mark.crash


@dataclass
class Fleet:
    dsn: str
    rng: random.Random
    processes: list[subprocess.Popen[str]] = field(default_factory=list)
    kills: list[tuple[float, int]] = field(default_factory=list)
    abandoned: dict[str, float] = field(default_factory=dict)
    """Runs a killed worker held, with the time it was found dead."""
    recoveries: list[float] = field(default_factory=list)
    """Seconds from a kill to another worker holding the run."""

    def start(self, *, crash: bool) -> None:
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        if crash:
            env["LANGGRAPH_DURABLE_CRASH_AT"] = self.rng.choice(CRASH_POINTS)
            env["LANGGRAPH_DURABLE_CRASH_AFTER"] = str(self.rng.randrange(0, 6))
        process = subprocess.Popen(
            [sys.executable, str(WORKER), self.dsn, "--lease", "2"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.processes.append(process)

    def replace_the_dead(self, *, crash: bool) -> int:
        died = 0
        for process in list(self.processes):
            code = process.poll()
            if code is None:
                continue
            self.processes.remove(process)
            assert code == -signal.SIGKILL, process.stderr.read() if process.stderr else code
            found_dead = time.monotonic()
            self.kills.append((found_dead, process.pid))
            for run_id in held_by(self.dsn, process.pid):
                self.abandoned[run_id] = found_dead
            died += 1
            self.start(crash=crash)
        self.note_recoveries()
        return died

    def note_recoveries(self) -> None:
        if not self.abandoned:
            return
        with psycopg.connect(self.dsn) as conn:
            rows = conn.execute(
                "SELECT run_id, status, owner FROM langgraph_durable_runs WHERE run_id = ANY(%s)",
                (list(self.abandoned),),
            ).fetchall()
        dead = {pid for _, pid in self.kills}
        for run_id, status, owner in rows:
            taken = status != "running" or owner_pid(owner) not in dead
            if taken:
                self.recoveries.append(time.monotonic() - self.abandoned.pop(run_id))

    def stop(self) -> None:
        for process in self.processes:
            process.kill()
            process.wait()


def owner_pid(owner: str | None) -> int | None:
    """The pid in a worker id `host:pid:start:suffix`."""
    parts = (owner or "").split(":")
    return int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else None


def held_by(dsn: str, pid: int) -> list[str]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT run_id, owner FROM langgraph_durable_runs WHERE status = 'running'"
        ).fetchall()
    return [run_id for run_id, owner in rows if owner_pid(owner) == pid]


def counts(dsn: str) -> dict[str, int]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT status, count(*) FROM langgraph_durable_runs GROUP BY status"
        ).fetchall()
    return {status: int(n) for status, n in rows}


def per_order(dsn: str, table: str) -> dict[str, int]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(f"SELECT order_id, count(*) FROM {table} GROUP BY order_id").fetchall()
    return {order: int(n) for order, n in rows}


def test_a_fleet_with_random_kills_finishes_every_run_once(fresh_db_dsn: str) -> None:
    print(f"fleet seed {SEED}, {RUNS} runs")
    rng = random.Random(SEED)
    created = subprocess.run(
        [sys.executable, str(WORKER), fresh_db_dsn, "--create", str(RUNS)],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    run_ids = json.loads(created.stdout.strip().splitlines()[-1])
    fleet = Fleet(fresh_db_dsn, rng)
    kills_wanted = max(3, RUNS // 4)
    for _ in range(3):
        fleet.start(crash=True)
    deadline = time.monotonic() + HANG_GUARD_S
    try:
        while counts(fresh_db_dsn).get("success", 0) < RUNS:
            assert time.monotonic() < deadline, counts(fresh_db_dsn)
            # Keep killing until enough kills happened, then let the fleet finish in peace.
            fleet.replace_the_dead(crash=len(fleet.kills) < kills_wanted)
            time.sleep(0.1)  # a poll interval of the loop, not a synchronisation
    finally:
        fleet.stop()
    assert counts(fresh_db_dsn) == {"success": RUNS}
    orders = {f"o-{i}": 1 for i in range(RUNS)}
    assert per_order(fresh_db_dsn, "fleet_reservations") == orders
    assert per_order(fresh_db_dsn, "fleet_charges") == orders
    assert per_order(fresh_db_dsn, "fleet_mails") == orders
    assert len(fleet.kills) >= 1, "no worker was killed: the test proved nothing"
    with psycopg.connect(fresh_db_dsn) as conn:
        attempts = conn.execute(
            "SELECT sum(attempt) FROM langgraph_durable_runs WHERE run_id = ANY(%s)", (run_ids,)
        ).fetchone()
    print(f"{len(fleet.kills)} kills; {attempts[0] if attempts else 0} executions for {RUNS} runs")
    if fleet.recoveries:
        ordered = sorted(fleet.recoveries)
        print(
            f"recovery after a kill (lease 2 s): min {ordered[0]:.2f} s, "
            f"median {ordered[len(ordered) // 2]:.2f} s, max {ordered[-1]:.2f} s "
            f"over {len(ordered)} runs"
        )


def test_a_run_that_kills_every_worker_ends_as_error_instead_of_looping(
    fresh_db_dsn: str,
) -> None:
    """A poison run (its node SIGKILLs the worker) is taken `max_attempts` (2) times by
    real worker processes, each killed by it; the third worker does not take it but ends
    it as error (`WorkerLost`) and stays alive."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    created = subprocess.run(
        [sys.executable, str(WORKER), fresh_db_dsn, "--poison", "--create", "1"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    (run_id,) = json.loads(created.stdout.strip().splitlines()[-1])

    def worker() -> subprocess.Popen[str]:
        return subprocess.Popen(
            [sys.executable, str(WORKER), fresh_db_dsn, "--poison", "--lease", "1"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )

    for _ in range(2):  # each worker takes the run (after the last one's lease ran out) and dies
        victim = worker()
        try:
            assert victim.wait(timeout=HANG_GUARD_S) == -signal.SIGKILL
        finally:
            if victim.poll() is None:
                victim.kill()
                victim.wait()
    survivor = worker()
    try:
        deadline = time.monotonic() + HANG_GUARD_S
        while True:
            with psycopg.connect(fresh_db_dsn) as conn:
                row = conn.execute(
                    "SELECT status, attempt, error_type, error_message, owner "
                    "FROM langgraph_durable_runs WHERE run_id = %s",
                    (run_id,),
                ).fetchone()
            assert row is not None
            if row[0] != "running":
                break
            assert survivor.poll() is None, survivor.stderr.read() if survivor.stderr else ""
            assert time.monotonic() < deadline, row
            time.sleep(0.1)  # a poll interval, not a synchronisation
        status, attempt, error_type, message, owner = row
        assert (status, attempt, error_type, owner) == ("error", 2, "WorkerLost", None)
        assert "in its last allowed attempt (2 of 2)" in message
        assert survivor.poll() is None  # it ended the run instead of taking it (and dying)
        with psycopg.connect(fresh_db_dsn) as conn:
            (executions,) = conn.execute("SELECT count(*) FROM poison_calls").fetchone() or (0,)
            lease = conn.execute(
                "SELECT t.owner, t.run_id FROM langgraph_durable_threads t "
                "JOIN langgraph_durable_runs r USING (thread_id) WHERE r.run_id = %s",
                (run_id,),
            ).fetchone()
        assert executions == 2
        assert lease == (None, None)  # the dead worker's lease was taken from it
    finally:
        survivor.kill()
        survivor.wait()
