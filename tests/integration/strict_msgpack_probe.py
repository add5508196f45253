"""Run by `test_strict_msgpack_env.py` in a process of its own, because LangGraph reads
`LANGGRAPH_STRICT_MSGPACK` once, when it is imported.

Runs one graph on our saver and on upstream's `PostgresSaver` (one thread each, in the
database given as the first argument) and prints, as JSON, what each saver loads back
from both threads: through the compiled graph (`get_state`, whose saver `compile()` gave
the state schema's types under strict mode) and through a fresh saver (`get_tuple`,
which has no allow-list of the graph's).
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
import json
import sys
from typing import Any, NamedTuple

from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.graph import END, START, StateGraph
from pydantic import BaseModel
from pydantic import v1 as pydantic_v1
from typing_extensions import TypedDict

from langgraph_durable import DurablePostgresSaver

if sys.version_info >= (3, 11):
    from enum import StrEnum
else:  # Python 3.10 has no StrEnum: what it is, spelled out

    class StrEnum(str, enum.Enum):
        pass


@dataclasses.dataclass
class Point:
    """In the state schema: `compile()` allow-lists it under strict mode."""

    x: int
    y: int


class Model(BaseModel):
    a: int
    when: datetime.datetime


class OldModel(pydantic_v1.BaseModel):
    a: int


@dataclasses.dataclass
class Node:
    x: int
    child: Node | None = None


class Pair(NamedTuple):
    a: int
    b: str


class Color(enum.Enum):
    RED = 1


class Level(enum.IntEnum):
    ONE = 1


class Mode(StrEnum):
    FAST = "fast"


class State(TypedDict, total=False):
    point: Point
    other: Any  # what it holds is in no schema


OTHER = {
    "pydantic": Model(a=1, when=datetime.datetime(2024, 5, 6, tzinfo=datetime.timezone.utc)),
    "pydantic_v1": OldModel(a=2),
    "dataclass": Node(1, Node(2)),
    "namedtuple": Pair(1, "x"),
    "enum": Color.RED,
    "intenum": Level.ONE,
    "strenum": Mode.FAST,
}


def shape(value: Any) -> Any:
    """What a loaded value is, type included at every level (`Level.ONE == 1`)."""
    if isinstance(value, dict):
        return {str(key): shape(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)) and type(value) in (list, tuple):
        return [type(value).__name__, *(shape(item) for item in value)]
    return [type(value).__qualname__, repr(value)]


def compiled(saver: Any) -> Any:
    builder = StateGraph(State)
    builder.add_node("put", lambda s: {"point": Point(1, 2), "other": OTHER})
    builder.add_edge(START, "put")
    builder.add_edge("put", END)
    return builder.compile(checkpointer=saver)


def main(dsn: str) -> None:
    found: dict[str, Any] = {}
    savers = {"ours": DurablePostgresSaver, "upstream": PostgresSaver}
    for name, kind in savers.items():
        with kind.from_conn_string(dsn) as saver:  # type: ignore[attr-defined]
            saver.setup()
            graph = compiled(saver)
            config = {"configurable": {"thread_id": name}}
            graph.invoke({}, config)
            found[f"{name} graph"] = shape(graph.get_state(config).values)
    for name, kind in savers.items():
        with kind.from_conn_string(dsn) as saver:  # type: ignore[attr-defined]
            for thread in savers:
                loaded = saver.get_tuple({"configurable": {"thread_id": thread}})
                values = loaded.checkpoint["channel_values"]
                found[f"{name} reads {thread}"] = shape(
                    {k: values[k] for k in State.__annotations__}
                )
    print(json.dumps(found))


if __name__ == "__main__":
    main(sys.argv[1])
