"""`LANGGRAPH_STRICT_MSGPACK`, set as users set it: in the environment of a new process.

LangGraph reads the variable once, when `langgraph.checkpoint.serde._msgpack` is imported
(its `JsonPlusSerializer` and `compile()` consult the value read then), so each mode runs
`strict_msgpack_probe.py` in a process of its own. In both modes our saver must load what
upstream's `PostgresSaver` loads, from its own rows and from upstream's.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
PROBE = Path(__file__).with_name("strict_msgpack_probe.py")


def probe(dsn: str, strict: bool) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "LANGGRAPH_STRICT_MSGPACK": str(strict).lower()}
    done = subprocess.run(
        [sys.executable, str(PROBE), dsn], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    found: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return found


@pytest.mark.parametrize("strict", [True, False], ids=["strict", "default"])
def test_our_saver_loads_what_upstreams_loads(fresh_db_dsn: str, strict: bool) -> None:
    found = probe(fresh_db_dsn, strict)
    assert found["ours graph"] == found["upstream graph"]
    for thread in ("ours", "upstream"):
        assert found[f"ours reads {thread}"] == found[f"upstream reads {thread}"]
    in_graph, fresh = found["ours graph"], found["ours reads ours"]
    # The schema's type is built through the graph (compile() lists it in strict mode) ...
    assert in_graph["point"][0] == "Point"
    other = in_graph["other"]
    if strict:
        # ... and nothing else that was not registered: plain data, as upstream loads it.
        assert fresh["point"] == {"x": ["int", "1"], "y": ["int", "2"]}
        assert {key: other[key][0] for key in ("enum", "intenum", "strenum")} == {
            "enum": "int",
            "intenum": "int",
            "strenum": "str",
        }
        for key in ("pydantic", "pydantic_v1", "dataclass", "namedtuple"):
            assert isinstance(other[key], dict), key
    else:
        assert fresh["point"][0] == "Point"
        assert {key: value[0] for key, value in other.items()} == {
            "pydantic": "Model",
            "pydantic_v1": "OldModel",
            "dataclass": "Node",
            "namedtuple": "Pair",
            "enum": "Color",
            "intenum": "Level",
            "strenum": "Mode",
        }
