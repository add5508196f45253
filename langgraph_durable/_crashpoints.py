"""Named points where a test can make this process die, to prove crash claims for real.

A crash test starts a worker with `LANGGRAPH_DURABLE_CRASH_AT=<point>` (or a comma list);
when the worker reaches that point it SIGKILLs itself: no `finally`, no `atexit`, no flush,
just like a power cut or an OOM kill. `LANGGRAPH_DURABLE_CRASH_AFTER=<n>` lets the first
n passes through the point go by. The variables are read once, when this module is first
imported (a crash test sets them in the worker's environment before it starts), so outside
tests a check costs one comparison. A test worker can call `act_instead(action)` to have the
point run `action(point)` once and go on instead of dying: the crash matrix uses it to cut
the process's database connections there (a fault, not a crash).
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable

__all__ = ["act_instead", "reached"]

_passes: dict[str, int] = {}
_action: Callable[[str], None] | None = None
_WANTED = frozenset(filter(None, os.environ.get("LANGGRAPH_DURABLE_CRASH_AT", "").split(",")))
_AFTER = int(os.environ.get("LANGGRAPH_DURABLE_CRASH_AFTER", "0") or 0)


def act_instead(action: Callable[[str], None] | None) -> None:
    """At the wanted point, call `action(point)` and go on instead of SIGKILL (None: kill)."""
    global _action
    _action = action


def reached(point: str) -> None:
    """SIGKILL this process if a test asked to crash at `point`."""
    if not _WANTED or point not in _WANTED:
        return
    seen = _passes.get(point, 0)
    _passes[point] = seen + 1
    if seen < _AFTER:
        return
    if _action is not None:
        if seen == _AFTER:  # a fault strikes once, like a crash
            _action(point)
        return
    sys.stdout.flush()
    sys.stderr.flush()
    os.kill(os.getpid(), signal.SIGKILL)
