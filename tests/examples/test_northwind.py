"""The Northwind refund story with real processes, in every durability mode.

The waiting worker is SIGKILLed and a fresh process approves; the customer gets one
"under review" email and one confirmation, and the money moves once. Written the wrong way
(email and approval in one node), the guard reports it and the journal still sends one
email. A refund made by hand while the run waits means no second refund.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import psycopg
import pytest

from langgraph_durable.embedded import in_schema

SCRIPT = Path(__file__).resolve().parents[2] / "examples" / "northwind_refund.py"


def run(dsn: str, *args: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--dsn", dsn, *args],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
        env={k: v for k, v in os.environ.items() if k != "LANGGRAPH_DURABLE_DSN"},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done


@pytest.mark.parametrize("mode", ["sync", "async", "exit"])
def test_story_kill_while_waiting_then_approve_elsewhere(db_dsn: str, mode: str) -> None:
    done = run(db_dsn, "--mode", mode)
    assert "SIGKILLed for a deploy" in done.stdout
    assert "refunded once: yes" in done.stdout
    assert '"18:00 Refund of $420 under review"' in done.stdout
    assert '"09:00 Your $420 refund is done"' in done.stdout


@pytest.mark.parametrize("mode", ["sync", "exit"])
def test_wrong_way_is_reported_and_still_emails_once(db_dsn: str, mode: str) -> None:
    done = run(db_dsn, "--mode", mode, "--wrong-way")
    assert "guard: Node 'tell_and_wait' performed 'email'" in done.stderr
    assert "refunded once: yes" in done.stdout


def test_manual_refund_while_waiting_means_no_second_refund(db_dsn: str) -> None:
    thread = f"northwind-manual-{uuid.uuid4().hex[:6]}"
    run(db_dsn, "story", "--mode", "sync")  # sets up the schema and the world
    with psycopg.connect(in_schema(db_dsn), autocommit=True) as conn:
        conn.execute("DELETE FROM northwind_payments WHERE order_id = '8890'")
        conn.execute("UPDATE northwind_orders SET refunded = 0 WHERE order_id = '8890'")
        conn.execute("DELETE FROM langgraph_durable_effects WHERE key = 'refund:8890'")
    run(db_dsn, "--thread", thread, "start")
    run(db_dsn, "manual-refund")  # someone refunds 8890 by hand while the run waits
    approved = run(db_dsn, "--thread", thread, "approve", "--approver", "manager-ana")
    outcome = json.loads(approved.stdout.strip().splitlines()[-1])
    assert outcome["approval_outcome"] == "no_longer_needed"
    assert "refund" not in outcome["log"]
    found = json.loads(run(db_dsn, "--thread", thread, "report").stdout)
    assert len(found["refunds"]) == 1  # the manual one
    assert "key=None" in found["refunds"][0]
    assert len(found["emails"]) == 1  # "under review"; no confirmation for a moot refund
