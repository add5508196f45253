"""Every example runs as a user would run it, and asserts its own claims (exit code 0)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run_example(name: str, dsn: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "LANGGRAPH_DURABLE_DSN": dsn}
    return subprocess.run(
        [sys.executable, str(ROOT / "examples" / name)],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )


def test_crash_resume_demo(db_dsn: str) -> None:
    done = run_example("crash_resume_demo.py", db_dsn)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "killed with SIGKILL during draft_reply" in done.stdout
    assert "steps finished before the kill ran once: yes" in done.stdout
