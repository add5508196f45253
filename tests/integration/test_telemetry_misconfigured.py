"""A misconfigured OpenTelemetry does not fail a graph run, nor its effects: the review's
repro raised `RuntimeError: generator raised StopIteration` from every run, after the
effect's receiver had acted. In a fresh process: the API loads its provider once."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

GRAPH = """
import os, sys, uuid
from typing import TypedDict
from langgraph.graph import END, START, StateGraph
from langgraph_durable import DurablePostgresSaver, effect

calls = []

@effect(name="telemetry_test.charge")
def charge(amount: int) -> str:
    calls.append(amount)
    return "ch_1"

class S(TypedDict, total=False):
    amount: int
    charge: str

builder = StateGraph(S)
builder.add_node("pay", lambda s: {"charge": charge(s["amount"])})
builder.add_edge(START, "pay")
builder.add_edge("pay", END)
with DurablePostgresSaver.from_conn_string(os.environ["DSN"]) as saver:
    saver.setup()
    graph = builder.compile(checkpointer=saver)
    config = {"configurable": {"thread_id": f"otel-{uuid.uuid4()}"}}
    assert graph.invoke({"amount": 5}, config) == {"amount": 5, "charge": "ch_1"}
    assert graph.invoke({"amount": 6}, config) == {"amount": 6, "charge": "ch_1"}
assert calls == [5, 6], calls
"""


@pytest.mark.parametrize("setting", ["OTEL_PYTHON_TRACER_PROVIDER", "OTEL_PYTHON_METER_PROVIDER"])
def test_runs_and_effects_go_on_with_a_broken_provider_setting(db_dsn: str, setting: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", GRAPH],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "DSN": db_dsn, setting: "nonexistent"},
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr.count("Telemetry is off") == 1, done.stderr
