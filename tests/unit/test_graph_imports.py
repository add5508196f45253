"""`--graph module:attribute` finds a module in the current directory, as `python -m` does.

The installed `langgraph-durable` script starts with its own folder on `sys.path`, not the
current directory: `web --graph graphs:builder` run beside `graphs.py` could not import it.
These tests give `sys.path` that shape (no `""`, no current directory) and import from a
folder made for the test.
"""

from __future__ import annotations

import importlib
import os
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langgraph.graph import StateGraph
from langgraph.pregel import Pregel

from langgraph_durable._imports import import_from_here
from langgraph_durable.cli._commands import _load_graph
from langgraph_durable.web._serve import find_graph

GRAPHS = """
from typing_extensions import TypedDict
from langgraph.graph import END, START, StateGraph


class State(TypedDict):
    n: int


builder = StateGraph(State)
builder.add_node("step", lambda state: state)
builder.add_edge(START, "step")
builder.add_edge("step", END)
graph = builder.compile()
"""


@pytest.fixture
def beside(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A module of graphs in the current directory, which `sys.path` does not name, as
    under the installed script; its name, new for each test."""
    name = f"graphs_beside_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{name}.py").write_text(GRAPHS)
    monkeypatch.chdir(tmp_path)
    here = os.getcwd()
    monkeypatch.setattr(
        sys, "path", [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    )
    monkeypatch.delitem(sys.modules, name, raising=False)
    yield name
    sys.modules.pop(name, None)


def test_web_graph_is_imported_from_the_current_directory(beside: str) -> None:
    assert isinstance(find_graph(f"{beside}:builder"), StateGraph)
    assert sys.path[-1] == os.getcwd()


def test_approvals_graph_is_imported_from_the_current_directory(beside: str) -> None:
    saver: Any = None  # a compiled graph is not called with it
    assert isinstance(_load_graph(f"{beside}:graph", saver), Pregel)


def test_the_current_directory_is_put_on_the_path_once(beside: str) -> None:
    """Named already (`""`, as under `python -m`), nothing is added; added once otherwise."""
    sys.path.insert(0, "")
    before = list(sys.path)
    import_from_here(beside)
    assert sys.path == before
    sys.path.remove("")
    import_from_here(beside)
    import_from_here(beside)
    assert sys.path.count(os.getcwd()) == 1


SHADOW = """
import pathlib

pathlib.Path("SHADOW_RAN").write_text(__name__)
"""


def test_a_file_named_like_an_installed_module_does_not_replace_it(
    beside: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found by review: with the current directory first on `sys.path`, `uvloop.py` and
    `httptools.py` beside the graph ran when uvicorn imported them lazily. `colorsys`
    (standard) and `jinja2` (installed, the console's) stand in for them: imported after
    the graph, each is the real one, and the graph's neighbour is still found."""
    here = Path.cwd()
    for shadowed in ("colorsys", "jinja2"):
        (here / f"{shadowed}.py").write_text(SHADOW)
        monkeypatch.delitem(sys.modules, shadowed, raising=False)
    neighbour = f"{beside}_helpers"
    (here / f"{neighbour}.py").write_text("VALUE = 42\n")
    monkeypatch.delitem(sys.modules, neighbour, raising=False)

    assert isinstance(find_graph(f"{beside}:builder"), StateGraph)
    for shadowed in ("colorsys", "jinja2"):
        real = importlib.import_module(shadowed)
        assert Path(str(real.__file__)).parent != here, shadowed
    assert not (here / "SHADOW_RAN").exists()
    assert importlib.import_module(neighbour).VALUE == 42
    sys.modules.pop(neighbour, None)
