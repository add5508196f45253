"""Binding a default durability mode to a compiled graph.

LangGraph takes `durability` from each `invoke`/`stream` call, or from a private config
key (`_langgraph.CONFIG_KEY_DURABILITY`), and defaults to `"async"`; it cannot be set at
compile time. A subgraph called from a node runs with the parent's config, so a mode
carried in the config reaches subgraphs too, where a call argument would not.
"""

from __future__ import annotations

from typing import Any, Literal, TypeVar, get_args

from langgraph.pregel import Pregel

from langgraph_durable._langgraph import CONFIG_KEY_DURABILITY
from langgraph_durable.errors import InvalidInputError

__all__ = ["Durability", "with_durability"]

Durability = Literal["sync", "async", "exit"]
G = TypeVar("G", bound="Pregel[Any, Any, Any, Any]")


def with_durability(graph: G, durability: Durability) -> G:
    """Return the graph with `durability` as its default mode, subgraphs included.

    A `durability=` argument given to `invoke`/`stream` still wins for that call.

    Example:
        ```python
        graph = with_durability(builder.compile(checkpointer=saver), "sync")
        graph.invoke(inputs, {"configurable": {"thread_id": "t-1"}})
        ```
    """
    if durability not in get_args(Durability):
        raise InvalidInputError(
            f"Unknown durability {durability!r}: use one of {get_args(Durability)}."
        )
    return graph.with_config(configurable={CONFIG_KEY_DURABILITY: durability})
