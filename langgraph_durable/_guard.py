"""The run-time guard against side effects before `interrupt()` in the same node.

LangGraph re-runs an interrupted node from its first line, so an email sent before the
`interrupt()` is sent again on resume unless it is journaled. The journal keeps it to one,
but the design is still wrong: the effect belongs in its own node, before the approval.

The effect runner records which effects each task performed in this process; the saver
reports each task that writes an interrupt. A task that did both gets a warning naming the
fix, or, in strict mode, an error. Strict mode is meant for development and tests.
"""

from __future__ import annotations

import os
import threading
import warnings
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Literal

from langgraph_durable.errors import (
    InvalidInputError,
    SideEffectBeforeInterruptError,
    SideEffectBeforeInterruptWarning,
)

__all__ = ["effect_performed", "interrupt_written", "set_interrupt_guard"]

GuardMode = Literal["warn", "strict", "off"]

_mode: GuardMode = "warn"
_lock = threading.Lock()


@dataclass
class _TaskEffects:
    node: str
    names: list[str] = field(default_factory=list)
    call_site: tuple[str, int] | None = None
    """Where the task's first effect was called: the user's node, for the report."""


_effects: OrderedDict[str, _TaskEffects] = OrderedDict()
_CAPACITY = 4096


def set_interrupt_guard(mode: GuardMode) -> None:
    """ "warn" (default), "strict" (raise `SideEffectBeforeInterruptError`) or "off".

    The environment variable `LANGGRAPH_DURABLE_INTERRUPT_GUARD` sets the same modes.
    """
    global _mode
    if mode not in ("warn", "strict", "off"):
        raise InvalidInputError(
            f"Interrupt guard mode must be 'warn', 'strict' or 'off', not {mode!r}."
        )
    _mode = mode


def _current_mode() -> GuardMode:
    env = os.environ.get("LANGGRAPH_DURABLE_INTERRUPT_GUARD")
    if env in ("warn", "strict", "off"):
        return env  # type: ignore[return-value]
    return _mode


def effect_performed(
    task_id: str | None,
    node: str,
    effect_name: str,
    call_site: tuple[str, int] | None = None,
) -> None:
    """Remember that a task ran (or replayed) an effect, and where it was called."""
    if not task_id:
        return
    with _lock:
        entry = _effects.get(task_id)
        if entry is None:
            entry = _TaskEffects(node, call_site=call_site)
            _effects[task_id] = entry
            while len(_effects) > _CAPACITY:
                _effects.popitem(last=False)
        if effect_name not in entry.names:
            entry.names.append(effect_name)


def interrupt_written(task_id: str) -> None:
    """Called when a task's interrupt is saved: warn or raise if it performed effects.

    Reported once per task, as one warning that points at the node's first effect call
    (the user's code), not at the saver that noticed it.
    """
    with _lock:
        entry = _effects.pop(task_id, None)
    if entry is None:
        return
    mode = _current_mode()
    if mode == "off":
        return
    names = ", ".join(repr(n) for n in entry.names)
    message = (
        f"Node {entry.node!r} performed {names} and then called interrupt(). LangGraph "
        "re-runs the whole node on resume; the effect journal keeps each effect to one "
        f"call, but move {', '.join(entry.names)} into its own node before the approval "
        "node."
    )
    if mode == "strict":
        raise SideEffectBeforeInterruptError(message)
    if entry.call_site is None:
        warnings.warn(message, SideEffectBeforeInterruptWarning, stacklevel=2)
        return
    filename, lineno = entry.call_site
    warnings.warn_explicit(message, SideEffectBeforeInterruptWarning, filename, lineno)
