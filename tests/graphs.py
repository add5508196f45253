"""Small LangGraph graphs shared by tests, crash workers and examples.

Each node appends its name to `log`, so a test can count how often each node ran.
"""

from __future__ import annotations

import operator
import uuid
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Annotated, Any

from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Send, interrupt
from typing_extensions import TypedDict

if TYPE_CHECKING:
    import pytest


class State(TypedDict, total=False):
    log: Annotated[list[str], operator.add]
    items: list[int]
    doubled: Annotated[list[int], operator.add]
    approved: Any


class ItemState(TypedDict):
    item: int


def _sub_graph() -> CompiledStateGraph[Any, Any, Any, Any]:
    sub = StateGraph(State)
    sub.add_node("sub_one", lambda s: {"log": ["sub_one"]})
    sub.add_node("sub_two", lambda s: {"log": ["sub_two"]})
    sub.add_edge(START, "sub_one")
    sub.add_edge("sub_one", "sub_two")
    sub.add_edge("sub_two", END)
    return sub.compile()


def fan_out(state: State) -> list[Send]:
    return [Send("double", {"item": i}) for i in state.get("items", [])]


def double(state: ItemState) -> dict[str, Any]:
    return {"doubled": [state["item"] * 2], "log": [f"double:{state['item']}"]}


def approve(state: State) -> dict[str, Any]:
    answer = interrupt({"question": "approve?", "doubled": sorted(state.get("doubled", []))})
    return {"approved": answer, "log": ["approve"]}


def feature_graph() -> StateGraph[Any, Any, Any, Any]:
    """start -> subgraph -> Send fan-out -> interrupting approval -> finish."""
    builder = StateGraph(State)
    builder.add_node("start", lambda s: {"log": ["start"]})
    builder.add_node("sub", _sub_graph())
    builder.add_node("double", double)
    builder.add_node("approve", approve)
    builder.add_node("finish", lambda s: {"log": ["finish"]})
    builder.add_edge(START, "start")
    builder.add_edge("start", "sub")
    builder.add_conditional_edges("sub", fan_out, ["double"])
    builder.add_edge("double", "approve")
    builder.add_edge("approve", "finish")
    builder.add_edge("finish", END)
    return builder


def linear_graph(
    nodes: tuple[str, ...] = ("a", "b"), state: Any = State
) -> StateGraph[Any, Any, Any, Any]:
    """START -> each node in turn -> END; each node appends its name to `log`."""
    builder = StateGraph(state)
    previous = START
    for name in nodes:
        builder.add_node(name, lambda s, name=name: {"log": [name]})
        builder.add_edge(previous, name)
        previous = name
    builder.add_edge(previous, END)
    return builder


APPLICATION_MODULE = """
from typing import TypedDict

from pydantic import BaseModel


class Deal(BaseModel):
    name: str
    amount: int


class State(TypedDict):
    deal: Deal


def grow(state: State) -> State:
    return {"deal": Deal(name=state["deal"].name, amount=state["deal"].amount + 1)}
"""


def application_graph(
    directory: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[ModuleType, StateGraph[Any]]:
    """A module of an application's own types (a pydantic `Deal` in the state), written to
    `directory` and imported under a new name, and a one-node graph (`grow`) over it. A
    test removes the module from `sys.modules` to read as a process without the
    application's code does (the CLI, the console)."""
    name = f"app_{uuid.uuid4().hex[:8]}"
    (directory / f"{name}.py").write_text(APPLICATION_MODULE)
    monkeypatch.syspath_prepend(str(directory))
    app = __import__(name)
    builder: StateGraph[Any] = StateGraph(app.State)
    builder.add_node("grow", app.grow)
    builder.add_edge(START, "grow")
    builder.add_edge("grow", END)
    return app, builder
