"""The run registry: how fast a SIGKILLed run recovers, and what the registry costs per run.

Both scenarios use real worker processes (`bench_runs_worker.py`), started and imported
before anything is timed.

Recovery (`recovery`): W workers (`Worker`, library defaults except the lease) take runs of
a slow linear graph (`slow:NODES:MS`, each node sleeps MS ms), one run at a time, so the
other workers are idle and waiting the way an idle worker waits (LISTEN/NOTIFY, and a
wake-up when the next lease runs out). Once the run has committed a few steps and a random
part of a node more, its worker is SIGKILLed. The run's row is then read every few ms:

- kill to expiry: the lease the dead worker left (`lease_expires_at` - kill time); a
  heartbeat every lease/3 puts it between 2/3 of the lease and the whole lease;
- expiry to claim: how late another worker took the run after the lease ran out (the
  claim sets `heartbeat_at`);
- kill to progress: until the new worker committed its next checkpoint (`put` sets
  `last_progress_at`); it includes re-running the interrupted node (MS ms).

The goal is "lease + at most 1 s" for kill to progress. A replacement worker is started
after each recovery (not timed), so the fleet keeps W workers.

Cost (`cost`): N runs of the 10-node graph of `durability_modes.py`, done by W worker
processes through the registry (runs created by this process, then the workers started on
the queue), against the same N invokes split over W processes calling `graph.invoke`
directly with the same saver (`durability="sync"`, new thread each). Commits are the
`xact_commit` delta of the scratch database in `pg_stat_database`, read once every
connection to it has closed (a backend reports its counts when it exits);
`pg_stat_statements` is not needed. This process waits for the runs to finish inside a
transaction it rolls back, so its polling commits nothing. Wall time per run is the time
until the last run finished / N (for the registry, creating the runs included). Autovacuum
may add a few commits to either side.
"""

from __future__ import annotations

import json
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import psycopg
from psycopg.conninfo import conninfo_to_dict

from langgraph_durable import DurablePostgresSaver, RunRegistry

WORKER = Path(__file__).with_name("bench_runs_worker.py")
HANG_GUARD_S = 300.0
POLL_S = 0.005


@dataclass
class RunsResults:
    """Samples of both scenarios, in plain lists so that they survive JSON.

    `recovery[lease]` maps a measure ("kill_to_expiry", "expiry_to_claim", "kill_to_claim",
    "kill_to_progress", seconds) to one sample per kill. `cost["registry|W"]` and
    `cost["direct|W"]` map a measure ("commits_per_run", "ms_per_run", "run_ms" the median
    time of one run, and for the registry "create_ms", "create_commits" per run) to one
    sample per round.
    """

    recovery: dict[str, dict[str, list[float]]] = field(default_factory=dict)
    cost: dict[str, dict[str, list[float]]] = field(default_factory=dict)
    node_ms: float = 0.0
    runs_per_level: int = 0


# ---------------------------------------------------------------------------------------
# worker processes


@dataclass
class _Process:
    popen: subprocess.Popen[str]
    stderr: IO[str]

    @property
    def stdout(self) -> IO[str]:
        assert self.popen.stdout is not None
        return self.popen.stdout

    def send(self, line: str) -> None:
        assert self.popen.stdin is not None
        self.popen.stdin.write(line + "\n")
        self.popen.stdin.flush()

    def expect(self, prefix: str) -> str:
        line = self.stdout.readline()
        if not line.startswith(prefix):
            self.stderr.seek(0)
            raise RuntimeError(
                f"worker {self.popen.pid} said {line!r}, not {prefix!r}: {self.stderr.read()}"
            )
        return line

    def kill(self) -> None:
        if self.popen.poll() is None:
            self.popen.kill()
        self.popen.wait()
        self.stderr.close()


def _start(dsn: str, count: int) -> list[_Process]:
    """`count` worker processes, each imported and ready for a command."""
    processes = []
    for _ in range(count):
        # Closed by `_Process.kill`; read only to explain a worker that failed.
        stderr = tempfile.TemporaryFile("w+", encoding="utf-8")  # noqa: SIM115
        popen = subprocess.Popen(
            [sys.executable, str(WORKER), dsn],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            env={**os.environ, "PYTHONPATH": str(WORKER.parent)},
        )
        processes.append(_Process(popen, stderr))
    for process in processes:
        process.expect("ready")
    return processes


@contextmanager
def _fleet(dsn: str, count: int) -> Iterator[list[_Process]]:
    processes = _start(dsn, count)
    try:
        yield processes
    finally:
        for process in processes:
            process.kill()


def _owner_pid(owner: str | None) -> int | None:
    """The pid in a worker id `host:pid:start:boot:pidns:suffix`."""
    parts = (owner or "").split(":")
    return int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else None


# ---------------------------------------------------------------------------------------
# recovery after SIGKILL

_RUN_ROW = """
SELECT status, owner, attempt, step, lease_expires_at, heartbeat_at, last_progress_at
FROM langgraph_durable_runs WHERE run_id = %s
"""


def _row(conn: psycopg.Connection[Any], run_id: str) -> tuple[Any, ...]:
    found = conn.execute(_RUN_ROW, (run_id,)).fetchone()
    assert found is not None, run_id
    return tuple(found)


def _until(conn: psycopg.Connection[Any], run_id: str, done: Any) -> tuple[Any, ...]:
    """Reads the run's row every POLL_S until `done(row)`; the row then."""
    deadline = time.monotonic() + HANG_GUARD_S
    while True:
        row = _row(conn, run_id)
        if done(row):
            return row
        if row[0] not in ("pending", "running"):
            raise RuntimeError(f"run {run_id} ended as {row[0]} while the benchmark waited")
        if time.monotonic() > deadline:
            raise RuntimeError(f"run {run_id} hung: {row}")
        time.sleep(POLL_S)


def recovery(
    dsn: str,
    lease: float,
    kills: int,
    *,
    workers: int = 3,
    nodes: int = 20,
    node_ms: float = 100.0,
    idle_wait: float = 5.0,
    seed: int = 11,
) -> dict[str, list[float]]:
    """Seconds per kill: kill_to_expiry, expiry_to_claim, kill_to_claim, kill_to_progress."""
    rng = random.Random(seed)
    graph = f"slow:{nodes}:{node_ms:g}"
    command = f"work {graph} {lease:g} {idle_wait:g}"
    out: dict[str, list[float]] = {
        k: [] for k in ("kill_to_expiry", "expiry_to_claim", "kill_to_claim", "kill_to_progress")
    }
    with (
        DurablePostgresSaver.from_conn_string(dsn, max_connections=2) as saver,
        psycopg.connect(dsn, autocommit=True) as watch,
        _fleet(dsn, workers) as fleet,
    ):
        saver.setup()
        for process in fleet:
            process.send(command)
            process.expect("working")
        registry = RunRegistry(saver)
        for i in range(kills):
            run_id = registry.create("bench_slow", {}, version="1").run_id
            _until(watch, run_id, lambda r: r[0] == "running" and (r[3] or -1) >= 2)
            time.sleep(rng.uniform(0, 1.5 * node_ms / 1000))  # somewhere in a step
            _, owner, attempt, *_ = _row(watch, run_id)
            victim = next(p for p in fleet if p.popen.pid == _owner_pid(owner))
            os.kill(victim.popen.pid, signal.SIGKILL)
            killed_at = time.time()
            victim.kill()
            fleet.remove(victim)
            first = _row(watch, run_id)
            claimed = _until(watch, run_id, lambda r, seen=attempt: r[2] > seen)
            claim_at = claimed[5].timestamp()
            # The claim sets last_progress_at too, a microsecond after heartbeat_at at most.
            progressed = _until(
                watch,
                run_id,
                lambda r, at=claim_at + 0.001: r[0] != "running" or r[6].timestamp() > at,
            )
            if first[2] == attempt and first[4] is not None:
                expiry = first[4].timestamp()
                out["kill_to_expiry"].append(expiry - killed_at)
                out["expiry_to_claim"].append(claim_at - expiry)
            out["kill_to_claim"].append(claim_at - killed_at)
            out["kill_to_progress"].append(progressed[6].timestamp() - killed_at)
            print(
                f"  lease {lease:g} s, kill {i + 1}/{kills}: claimed after "
                f"{claim_at - killed_at:.3f} s, progress after "
                f"{out['kill_to_progress'][-1]:.3f} s",
                file=sys.stderr,
                flush=True,
            )
            if i < kills - 1:  # keep the fleet's size, untimed
                (replacement,) = _start(dsn, 1)
                replacement.send(command)
                replacement.expect("working")
                fleet.append(replacement)
            _until(watch, run_id, lambda r: r[0] == "success")
    return out


# ---------------------------------------------------------------------------------------
# cost per run: registry against direct invokes


def _commits(server_dsn: str, dbname: str) -> int:
    """The database's `xact_commit`, once no connection to it is left (so none is pending)."""
    deadline = time.monotonic() + HANG_GUARD_S
    with psycopg.connect(server_dsn, autocommit=True) as conn:
        while True:
            left = conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = %s", (dbname,)
            ).fetchone()
            if left is not None and left[0] == 0:
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"connections to {dbname} never closed")
            time.sleep(0.02)
        found = conn.execute(
            "SELECT xact_commit FROM pg_stat_database WHERE datname = %s", (dbname,)
        ).fetchone()
    assert found is not None
    return int(found[0])


def _direct(server_dsn: str, dsn: str, workers: int, runs: int) -> dict[str, float]:
    dbname = str(conninfo_to_dict(dsn)["dbname"])
    with _fleet(dsn, workers) as fleet:
        before = _commits(server_dsn, dbname)
        start = time.perf_counter()
        for i, process in enumerate(fleet):
            process.send(f"direct steps {runs // workers + (i < runs % workers)}")
        times: list[float] = []
        for process in fleet:
            times += [float(ms) for ms in _json(process.expect("{"))["ms"]]
        wall = time.perf_counter() - start
    after = _commits(server_dsn, dbname)
    return {
        "commits_per_run": (after - before) / runs,
        "ms_per_run": wall * 1000 / runs,
        "run_ms": statistics.median(times),
    }


def _json(line: str) -> dict[str, Any]:
    found: dict[str, Any] = json.loads(line)
    return found


def _registry(
    server_dsn: str, dsn: str, workers: int, runs: int, lease: float, idle_wait: float
) -> dict[str, float]:
    dbname = str(conninfo_to_dict(dsn)["dbname"])
    with _fleet(dsn, workers) as fleet:
        before = _commits(server_dsn, dbname)
        start = time.perf_counter()
        with DurablePostgresSaver.from_conn_string(dsn, max_connections=1) as saver:
            registry = RunRegistry(saver)
            run_ids = [registry.create("bench_steps", {}, version="1").run_id for _ in range(runs)]
        create_s = time.perf_counter() - start
        created = _commits(server_dsn, dbname)
        with psycopg.connect(dsn) as watch:  # one transaction, rolled back: no commits
            start = time.perf_counter()
            for process in fleet:
                process.send(f"work steps {lease:g} {idle_wait:g}")
            deadline = time.monotonic() + HANG_GUARD_S
            while True:
                row = watch.execute(
                    "SELECT count(*) FILTER (WHERE status = 'success'), "
                    "count(*) FILTER (WHERE status NOT IN ('pending', 'running', 'success')) "
                    "FROM langgraph_durable_runs WHERE run_id = ANY(%s)",
                    (run_ids,),
                ).fetchone()
                assert row is not None
                if row[1]:
                    raise RuntimeError(f"{row[1]} runs did not succeed")
                if row[0] == runs:
                    break
                if time.monotonic() > deadline:
                    raise RuntimeError(f"only {row[0]} of {runs} runs finished")
                time.sleep(POLL_S)
            work_s = time.perf_counter() - start
            durations = watch.execute(
                "SELECT extract(epoch FROM finished_at - started_at) * 1000 "
                "FROM langgraph_durable_runs WHERE run_id = ANY(%s)",
                (run_ids,),
            ).fetchall()
            watch.rollback()
    after = _commits(server_dsn, dbname)
    return {
        "commits_per_run": (after - before) / runs,
        "ms_per_run": (create_s + work_s) * 1000 / runs,
        "run_ms": statistics.median(float(d[0]) for d in durations),
        "create_ms": create_s * 1000 / runs,
        "create_commits": (created - before) / runs,
    }


def cost(
    server_dsn: str,
    dsn: str,
    levels: tuple[int, ...],
    runs: int,
    rounds: int,
    *,
    lease: float = 30.0,
    idle_wait: float = 5.0,
) -> dict[str, dict[str, list[float]]]:
    """Per round and level: the registry's and direct invokes' commits and ms per run.

    `server_dsn` is any database on the server (where `pg_stat_database` is read from, so
    reading it commits nothing in the measured one); `dsn` the scratch database.
    """
    with DurablePostgresSaver.from_conn_string(dsn, max_connections=1) as saver:
        saver.setup()
    out: dict[str, dict[str, list[float]]] = {}
    for round_ in range(rounds):
        for level in levels:
            modes = ("direct", "registry") if round_ % 2 == 0 else ("registry", "direct")
            for mode in modes:
                if mode == "direct":
                    sample = _direct(server_dsn, dsn, level, runs)
                else:
                    sample = _registry(server_dsn, dsn, level, runs, lease, idle_wait)
                for key, value in sample.items():
                    out.setdefault(f"{mode}|{level}", {}).setdefault(key, []).append(value)
                print(
                    f"  round {round_ + 1}, {level} workers, {mode}: "
                    f"{sample['commits_per_run']:.2f} commits/run, "
                    f"{sample['ms_per_run']:.2f} ms/run",
                    file=sys.stderr,
                    flush=True,
                )
    return out


def runs_benchmark(
    server_dsn: str,
    scratch: Any,
    *,
    recovery_plan: tuple[tuple[float, int], ...],
    workers: int,
    nodes: int,
    node_ms: float,
    levels: tuple[int, ...],
    runs: int,
    rounds: int,
) -> RunsResults:
    """Both scenarios, each in a scratch database made by `scratch(server_dsn, tag)`."""
    results = RunsResults(node_ms=node_ms, runs_per_level=runs)
    for lease, kills in recovery_plan:
        with scratch(server_dsn, "runs_recovery") as dsn:
            results.recovery[f"{lease:g}"] = recovery(
                dsn, lease, kills, workers=workers, nodes=nodes, node_ms=node_ms
            )
    with scratch(server_dsn, "runs_cost") as dsn:
        results.cost = cost(server_dsn, dsn, levels, runs, rounds)
    return results
