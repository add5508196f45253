"""`benchmarks/run.py --quick` runs every scenario and reports each one; no timing is asserted.

It writes into a temporary folder, never over `docs/`.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

ROWS = (
    "| graph alone (no checkpointer) |",
    "| LangGraph with a saver that only commits one single-row INSERT per step, durability=sync |",
    "| LangGraph with a saver that only runs our put statement (upstream's rows, a step's writes) "
    "with precomputed parameters, durability=sync |",
    "| per step, durability=sync |",
    "| per step, durability=async |",
    "| per step, durability=exit |",
    "| throughput, 1 concurrent thread |",
    "| throughput, 4 concurrent threads |",
    "| throughput, 16 concurrent threads |",
    "| async, 8 concurrent runs on one event loop | steps/s |",
    "| async, 8 concurrent runs on one event loop, GC thresholds 50,000/50/100 | steps/s |",
    "| large value, 1 KB: put |",
    "| large value, 100 KB: get_tuple |",
    "| chat of 20 messages: put |",
    "| chat of 20 messages: get_tuple |",
    "| latest get_tuple, thread of 100 checkpoints |",
    "| latest get_tuple, thread of 1,000 checkpoints |",
    "| list(limit=10), thread of 100 checkpoints |",
    "| list(limit=10), thread of 1,000 checkpoints |",
    "| storage per step, 20-turn chat |",
    "| storage per step, same chat, messages in a DeltaChannel (beta) |",
    "| storage per step, same chat, ours with pglz TOAST compression |",
    "| @effect call (claim + complete) vs two INSERT+commit |",
    "| raw floor: one single-row INSERT+commit |",
    "| 1 worker process on one Postgres, total | steps/s |",
    "| 1 worker process on one Postgres, 4 async runs on one event loop each, total | steps/s |",
    "| recovery after a SIGKILL, lease 1 s: kill to the next checkpoint | s |",
    "| run registry commits per run, 1 worker process | commits/run |",
    "| run registry wall time per run, 1 worker process | ms/run |",
)

TARGETS = (
    "| sync per-step time vs upstream's best |",
    "| async per-step time vs upstream's best |",
    "| sync per-step time vs the drop-in floor (our put statement alone) |",
    "| async per-step time vs the drop-in floor (our put statement alone) |",
    "| exit per-step time vs upstream's best |",
    "| throughput with 16 threads vs upstream's best |",
    "| async, recommended GC setting: ours at 8 concurrent runs vs ours at 2 |",
    "| latest fetch on the 1,000-checkpoint thread vs upstream |",
    "| latest fetch flat: ours on 1,000 vs on 100 checkpoints |",
    "| storage per step vs upstream, recommended setting (messages in a DeltaChannel) |",
    "| @effect overhead vs the two-commit floor |",
    "| 1 worker process on one Postgres: total steps/s vs upstream's best |",
    "| 1 worker process on one Postgres, 4 async runs on one event loop each: total steps/s "
    "vs upstream's best |",
    "| recovery after a SIGKILL: worst kill to next checkpoint vs lease + 1 s |",
)


def _scenarios() -> tuple[str, ...]:
    """`SCENARIOS` of benchmarks/run.py, read from its source (importing it would import
    every benchmark module into the test process)."""
    tree = ast.parse((ROOT / "benchmarks" / "run.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "SCENARIOS" for t in node.targets
        ):
            found = ast.literal_eval(node.value)
            assert isinstance(found, tuple)
            return found
    raise AssertionError("benchmarks/run.py defines no SCENARIOS")


def test_run_quick_reports_every_scenario(db_dsn: str, tmp_path: Path) -> None:
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "run.py"),
            "--quick",
            "--dsn",
            db_dsn,
            "--out",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    written = (tmp_path / "benchmarks.md").read_text(encoding="utf-8")
    for text in (done.stdout, written):
        for row in ROWS + TARGETS:
            assert row in text, f"missing row {row!r}"
        assert "| ours | baseline | upstream setup | ours / baseline |" in text
        assert "| gap | best a drop-in saver could do here |" in text
        assert "no-op checkpointer (the ceiling in one process)" in text
        assert "- postgres: PostgreSQL " in text  # the machine is noted
        assert " cores, " in text
    results = json.loads((tmp_path / "benchmarks.json").read_text(encoding="utf-8"))
    assert results["settings"]["quick"] is True
    for scenario in _scenarios():
        assert results[scenario], f"{scenario} has no results"
    for scenario in ("processes", "processes_async"):
        for key, found in results[scenario].items():
            assert min(found["steps_per_s"]) > 0, f"{scenario} {key} counted no steps"
    try:
        import matplotlib  # noqa: F401
    except ImportError:  # the plot needs the `bench` extra
        assert "no plot" in done.stdout
    else:
        assert (tmp_path / "benchmarks.png").stat().st_size > 10_000
