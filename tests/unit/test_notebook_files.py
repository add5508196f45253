"""The committed notebooks match their sources (`tools/notebooks.py --check`, no database)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytest.importorskip("jupytext")


def test_every_notebook_is_committed_executed_and_current() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "notebooks.py"), "--check"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr


def test_the_check_finds_a_stale_notebook(tmp_path: Path) -> None:
    """Edit a copy of a source: the check must see that its .ipynb no longer matches."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("notebooks_tool", ROOT / "tools" / "notebooks.py")
    assert spec is not None
    assert spec.loader is not None
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    for source in (ROOT / "notebooks").glob("unknown_outcomes.*"):
        text = source.read_text(encoding="utf-8")
        if source.suffix == ".py":
            text = text.replace("# %%", "# %%\nprint('an edit')", 1)
        (tmp_path / source.name).write_text(text, encoding="utf-8")
    tool.NOTEBOOKS = tmp_path
    assert tool.check() == [
        "unknown_outcomes.ipynb is stale: its cells differ from unknown_outcomes.py"
    ]
