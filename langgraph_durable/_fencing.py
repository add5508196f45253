"""The fencing token a config carries when its writer holds a thread's lease.

A worker that takes a run (or `exclusive()` on a thread) holds the thread's lease at a
fencing token; it puts `Fence(token, run_id)` into the graph config under a key LangGraph
neither copies into checkpoint metadata nor uses (keys starting with "__" are left out).
The saver reads it back for every write that advances the thread, and the statement
refuses a token that is no longer the thread's (invariant I5).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from langchain_core.runnables import RunnableConfig

__all__ = ["FENCE_KEY", "Fence", "fence_of", "fence_token_of", "with_fence"]

FENCE_KEY = "__langgraph_durable_fence"


@dataclass(frozen=True)
class Fence:
    """The lease a writer holds: the thread's token when it took the lease, and its run."""

    token: int
    run_id: str | None = None


def fence_of(config: RunnableConfig | None) -> Fence | None:
    found = ((config or {}).get("configurable") or {}).get(FENCE_KEY)
    return found if isinstance(found, Fence) else None


def fence_token_of(config: RunnableConfig | None) -> int | None:
    """The fencing token a write under `config` carries, or None without a lease."""
    fence = fence_of(config)
    return None if fence is None else fence.token


def with_fence(config: Mapping[str, Any], fence: Fence) -> RunnableConfig:
    """A copy of `config` whose writes carry `fence`."""
    configurable = {**(config.get("configurable") or {}), FENCE_KEY: fence}
    return {**config, "configurable": configurable}  # type: ignore[typeddict-item]
