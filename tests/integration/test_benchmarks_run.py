"""The benchmarks run in their quick mode, so they never rot; no timing is asserted."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_durability_modes_benchmark_quick(db_dsn: str) -> None:
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "durability_modes.py"),
            "--quick",
            "--dsn",
            db_dsn,
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "| DurablePostgresSaver | sync |" in done.stdout
