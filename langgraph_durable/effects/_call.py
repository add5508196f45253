"""One call of an effect, as prepared by `@effect` and carried out by the runners."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from langgraph_durable.effects._keys import TaskContext
from langgraph_durable.effects._policy import RetryPolicy

__all__ = ["EffectCall"]


@dataclass(frozen=True)
class EffectCall:
    """Everything needed to run one call of an effect."""

    name: str
    key: str
    input_hash: str
    policy: RetryPolicy
    lease_seconds: float
    wait_seconds: float
    where: TaskContext | None
    invoke: Callable[[str], Any]
    reconcile: Callable[[str], Any] | None
    usage_of: Callable[[Any], dict[str, Any] | None] | None = None
    guarded: bool = True
