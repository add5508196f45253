"""The sync modules are generated from their async sources; the check fails the build on
a stale copy, leftover async code, unused rules or code that is not I/O."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def test_sync_twin_is_up_to_date() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "async_to_sync.py"), "--check"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr


def generator() -> Any:
    spec = importlib.util.spec_from_file_location(
        "async_to_sync", ROOT / "tools" / "async_to_sync.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SOURCE = '''"""A source.

Async source: the sync twin is generated from this file.
"""

import asyncio

__all__ = ["AsyncThing", "afetch"]


async def afetch(conn: Any) -> int:
    await asyncio.sleep(0)
    return 1


class AsyncThing:
    async def aget(self) -> int:
        return await afetch(None)
'''


def test_renames_are_derived_from_what_the_sources_define() -> None:
    tool = generator()
    renames = tool.derived_renames({"x/_athing.py": SOURCE})
    assert renames == {"afetch": "fetch", "AsyncThing": "Thing", "aget": "get"}
    converted = tool.convert(SOURCE, "_athing.py", tool.rename_rules({"x/_athing.py": SOURCE}))
    assert "def fetch(conn" in converted
    assert "class Thing:" in converted
    assert "return fetch(None)" in converted
    assert "Generated from the async source" in converted
    assert tool.problems_of({"x/_athing.py": SOURCE}, {"x/_thing.py": converted}) == []


def test_the_check_finds_what_a_generated_file_must_not_hold() -> None:
    tool = generator()
    bad_source = SOURCE.replace("Async source: the sync twin is generated from this file.", "")
    bad_source += "\n\ndef helper() -> int:\n    return 2\n\n\nLIMIT = 3\n"
    leftover = "# WARNING: generated\n# x\nasync def fetch() -> None:\n    await afetch()\n"
    problems = "\n".join(tool.problems_of({"x/_athing.py": bad_source}, {"x/_thing.py": leftover}))
    assert "lacks the line" in problems
    assert "helper is not I/O" in problems
    assert "LIMIT = 3 is not I/O" in problems
    assert "async leftover 'async'" in problems
    assert "async name 'afetch' left behind" in problems
    assert "unused rule: 'AsyncConnectionPool'" in "\n".join(
        tool.unused_rules({"x/_athing.py": SOURCE})
    )
