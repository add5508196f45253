"""Which run events a finish and a sweep announce (pure; no database)."""

from __future__ import annotations

import math
from datetime import date
from decimal import Decimal
from typing import Any

import pytest

from langgraph_durable import EffectOutcomeUnknown, RunStatus
from langgraph_durable.runs._events import RUN_EVENTS, finish_events, json_request, sweep_events
from langgraph_durable.runs._model import Run, outcome_of

ALL = frozenset(RUN_EVENTS)


def a_run() -> Run:
    return Run(
        run_id="r1",
        thread_id="t1",
        graph_name="g",
        graph_version="1",
        status=RunStatus.RUNNING,
        status_reason=None,
        multitask_strategy="enqueue",
        durability="sync",
        attempt=1,
        max_attempts=3,
        config={},
        metadata={},
        fencing_token=7,
    )


def test_an_unknown_effect_blocks_the_run_and_names_its_key() -> None:
    outcome = outcome_of(a_run(), error=EffectOutcomeUnknown("open", key="refund:8890"))
    events = finish_events(a_run(), outcome, [], ALL)
    assert [(kind, payload.get("effect_key")) for kind, payload, _ in events] == [
        ("run.blocked", None),
        ("effect.unknown", "refund:8890"),
    ]
    again = finish_events(a_run(), outcome, [], ALL)
    assert [e[2] for e in again] == [e[2] for e in events]  # stable ids: stored once
    assert finish_events(a_run(), outcome, [], frozenset({"run.failed"})) == []


def test_a_sweep_announces_stuck_timed_out_and_crash_looped_runs() -> None:
    changed = {
        "timed_out": [{"run_id": "a", "thread_id": "t"}],
        "crash_loops": [{"run_id": "b", "thread_id": "t", "attempt": 3}],
        "stuck": [
            {
                "run_id": "c",
                "thread_id": "u",
                "graph_name": "g",
                "status": "running",
                "updated_at": "2026-12-03T10:00:00+00:00",
            }
        ],
        "blocked": [],
    }
    events = sweep_events(changed, ALL)
    assert [(kind, payload["run_id"], payload["status"]) for kind, payload, _ in events] == [
        ("run.timed_out", "a", "timeout"),
        ("run.failed", "b", "error"),
        ("run.stuck", "c", "running"),
    ]
    assert events[1][1]["error_type"] == "WorkerLost"
    assert sweep_events(changed, frozenset({"run.stuck"}))[0][0] == "run.stuck"


@pytest.mark.parametrize(
    ("question", "carried"),
    [
        ({"amount": 420, "order": "8890"}, {"request": {"amount": 420, "order": "8890"}}),
        (
            {"amount": Decimal("420.00"), "due": date(2026, 1, 2)},
            {"request": {"amount": "420.00", "due": "2026-01-02"}},
        ),
        ({"amount": math.nan}, {"request": None, "request_type": "dict"}),
        ({"note": "a\x00b"}, {"request": None, "request_type": "dict"}),
        (["\ud800"], {"request": None, "request_type": "list"}),
    ],
)
def test_an_approval_question_is_carried_as_json_postgres_stores(
    question: Any, carried: dict[str, Any]
) -> None:
    assert json_request(question) == carried
