"""The issue-5 examples run as a user would run them, and assert their own claims (exit 0).

Each runs as a subprocess with `LANGGRAPH_DURABLE_DSN` set to the test database; the
stories start and SIGKILL their own worker processes.
"""

from __future__ import annotations

import difflib
import importlib
import importlib.util
import inspect
import json
import os
import re
import subprocess
import sys
import uuid
from pathlib import Path
from types import ModuleType

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def run_example(
    name: str, dsn: str, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(EXAMPLES / name), *args],
        env={**os.environ, "LANGGRAPH_DURABLE_DSN": dsn, **(env or {})},
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )


def load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_add_to_existing_graph_changes_under_20_lines() -> None:
    example = load("add_to_existing_graph")
    before = inspect.getsource(example.before).splitlines()
    after = inspect.getsource(example.after).splitlines()
    changed = [
        line
        for line in difflib.unified_diff(before, after, lineterm="", n=0)
        if line[:1] in "+-" and not line.startswith(("+++", "---"))
    ]
    assert 0 < len(changed) < 20, "\n".join(changed)
    assert any("checkpointer=saver" in line for line in changed)
    assert any("@effect" in line for line in changed)


def test_add_to_existing_graph_runs(db_dsn: str) -> None:
    done = run_example("add_to_existing_graph.py", db_dsn)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "before: ticket 2; the helpdesk has 2 tickets" in done.stdout
    assert "after: ticket 1; the helpdesk has 1 tickets" in done.stdout
    assert "with the effect (two without): yes" in done.stdout


def test_seven_step_workflow_default_is_the_readme_demo(db_dsn: str) -> None:
    done = run_example("seven_step_workflow.py", db_dsn)
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert 'durability="exit"' in out
    assert "was SIGKILLed before step 7 (notify)" in out
    assert "sent the same input again" in out
    saved = re.search(r"0 tokens billed after the crash, (\d+) tokens saved by 2 replays", out)
    assert saved is not None, out
    assert int(saved.group(1)) > 0
    assert "side effects the outside world saw: 1 deal, 1 task, 1 notification" in out
    assert "FAILED" not in out
    assert "all claims hold: yes" in out


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_seven_step_workflow_other_modes(db_dsn: str, mode: str) -> None:
    done = run_example("seven_step_workflow.py", db_dsn, "--mode", mode)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 deal, 1 task, 1 notification" in done.stdout
    assert "all claims hold: yes" in done.stdout
    if mode == "sync":
        assert "resumed from the last checkpoint" in done.stdout
        assert "[ok] nothing before step 7 ran again" in done.stdout


@pytest.mark.parametrize("mode", ["sync", "exit"])
def test_seven_step_worker_leaves_a_finished_thread_alone(db_dsn: str, mode: str) -> None:
    """A worker started again on a thread whose run finished (its process may have died
    just after the last commit) must not send the input again: that is a second run of the
    workflow, with new effect keys, so a second deal and a second mail."""
    thread = f"finished-{mode}-{uuid.uuid4().hex[:8]}"
    assert run_example("seven_step_workflow.py", db_dsn, "setup").returncode == 0
    for _ in range(2):
        args = ("--mode", mode, "--thread", thread, "worker")
        done = run_example("seven_step_workflow.py", db_dsn, *args)
        assert done.returncode == 0, done.stderr
    assert '"started_from": "finished"' in done.stdout
    report = run_example("seven_step_workflow.py", db_dsn, "--thread", thread, "report")
    seen = json.loads(report.stdout)
    assert (len(seen["deals"]), len(seen["tasks"]), len(seen["notifications"])) == (1, 1, 1)
    assert len(seen["model_bill"]) == 2


def test_seven_step_workflow_real_model_needs_langchain(db_dsn: str) -> None:
    if importlib.util.find_spec("langchain") is not None:
        pytest.skip("langchain is installed: the env var would reach a real provider")
    done = run_example(
        "seven_step_workflow.py",
        db_dsn,
        "--thread",
        "no-langchain",
        "worker",
        env={"LANGGRAPH_DURABLE_CHAT_MODEL": "openai:gpt-4o-mini"},
    )
    assert done.returncode != 0
    assert "needs langchain's init_chat_model" in done.stderr
    assert "Traceback" not in done.stderr


def test_payment_crash_every_ending_charges_once(db_dsn: str) -> None:
    done = run_example("payment_crash.py", db_dsn)
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert "resume stopped: EffectOutcomeUnknown" in out
    assert "journal: status=completed attempt=1 resolved_by=operator" in out
    assert "journal: status=completed attempt=1 resolved_by=reconcile" in out
    assert "journal: status=completed attempt=2 resolved_by=None" in out
    assert out.count("charged once and shipped once: yes") == 3
    assert "one charge per checkout in every ending: yes" in out
