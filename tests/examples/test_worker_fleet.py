"""The worker fleet example: a worker SIGKILLed mid-run, the others finish every run once.

The story runs as a user runs it (a subprocess, `LANGGRAPH_DURABLE_DSN` set to the test
database), and the test then reads the database itself rather than trusting the report:
every run of the story succeeded, the killed run ran twice, and the payment service and the
mailer each got one call per key and per order. A second test drives the example's worker
processes to show a SIGTERM in the middle of a run hands the run back to the queue.
"""

from __future__ import annotations

import importlib.util
import os
import re
import signal
import subprocess
import sys
import uuid
from pathlib import Path
from types import ModuleType
from typing import Any

import psycopg
from psycopg.rows import dict_row

from langgraph_durable.embedded import in_schema

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "worker_fleet.py"
RUNS = 12


def load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("example_worker_fleet", EXAMPLE)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def rows(dsn: str, sql: str, *params: Any) -> list[dict[str, Any]]:
    with psycopg.connect(dsn, row_factory=dict_row) as conn:
        return conn.execute(sql, params).fetchall()


def test_the_fleet_finishes_every_run_and_delivers_each_effect_once(db_dsn: str) -> None:
    done = subprocess.run(
        [sys.executable, str(EXAMPLE), "--runs", str(RUNS)],
        env={**os.environ, "LANGGRAPH_DURABLE_DSN": db_dsn},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    out = done.stdout
    assert done.returncode == 0, out + done.stderr
    assert db_dsn not in out + done.stderr  # the DSN never shows
    assert "worker-2 SIGKILLed (exit -9)" in out
    assert "stopped with SIGTERM: worker-1 exit 0, worker-3 exit 0" in out
    assert "FAILED" not in out
    assert "all claims hold: yes" in out
    found = re.search(r"^batch (\w+):", out, re.MULTILINE)
    assert found is not None, out
    batch = found.group(1)

    dsn = in_schema(db_dsn)
    runs = rows(
        dsn,
        "SELECT (metadata ->> 'order_no')::int AS order_no, status, attempt "
        "FROM langgraph_durable_runs WHERE graph_name = %s ORDER BY 1",
        f"refunds-{batch}",
    )
    assert [r["order_no"] for r in runs] == list(range(1, RUNS + 1))
    assert {r["status"] for r in runs} == {"success"}
    assert sorted(r["attempt"] for r in runs) == [1] * (RUNS - 1) + [2]  # the killed one
    orders = list(range(1, RUNS + 1))
    for table in ("wf_refunds", "wf_mails"):
        per_key = rows(
            dsn,
            f"SELECT key, count(*) AS calls, min(order_no) AS order_no FROM {table} "
            "WHERE batch = %s GROUP BY key ORDER BY 3",
            batch,
        )
        assert [k["calls"] for k in per_key] == [1] * RUNS, table
        assert [k["order_no"] for k in per_key] == orders, table
    closed = rows(
        dsn,
        "SELECT DISTINCT worker FROM wf_steps WHERE batch = %s AND node = 'close'",
        batch,
    )
    assert "worker-2" not in {c["worker"] for c in closed}


def test_a_worker_stopped_mid_run_hands_its_run_back(db_dsn: str) -> None:
    fleet = load()
    dsn = in_schema(db_dsn)
    fleet.setup(dsn)
    batch = uuid.uuid4().hex[:8]
    holding = fleet.start_worker(dsn, batch, fleet.VICTIM)  # pauses inside its first refund
    procs = {fleet.VICTIM: holding}
    try:
        fleet.wait_until(
            dsn,
            "SELECT 1 FROM langgraph_durable_workers WHERE worker_id = %(id)s",
            {"id": f"{fleet.VICTIM}@{batch}"},
            procs,
            "the worker announced itself",
        )
        (run,) = fleet.create_runs(dsn, batch, 1)
        fleet.wait_for_victim(dsn, batch, procs)
        holding.send_signal(signal.SIGTERM)
        _, err = holding.communicate(timeout=120)
        assert holding.returncode == 0, err
        assert "the run went back to the queue" in err
        (back,) = rows(dsn, "SELECT * FROM langgraph_durable_runs WHERE run_id = %s", run.run_id)
        assert back["status"] == "pending"
        assert back["status_reason"] == "handed back: its worker stopped"
        assert back["owner"] is None

        procs = {"worker-1": fleet.start_worker(dsn, batch, "worker-1")}
        fleet.wait_all(dsn, batch, [run.run_id], procs, 1, progress=False)
        assert fleet.stop_fleet(procs) == {"worker-1": 0}
    finally:
        for proc in procs.values():
            proc.kill()
    found = fleet.collect(dsn, batch)
    # The hand-back gave its attempt back: one execution counted.
    assert [(r["status"], r["attempt"]) for r in found["runs"]] == [("success", 1)]
    assert [(r["order_no"], r["worker"]) for r in found["wf_refunds"]] == [(1, fleet.VICTIM)]
    assert [r["order_no"] for r in found["wf_mails"]] == [1]
    refund = [j for j in found["journal"] if j["node"] == "refund"]
    assert [(j["status"], j["resolved_by"]) for j in refund] == [("completed", "reconcile")]
