"""Named points where a test can make this process die, to prove crash claims for real.

A crash test starts a worker with `LANGGRAPH_DURABLE_CRASH_AT=<point>` (or a comma list);
when the worker reaches that point it SIGKILLs itself: no `finally`, no `atexit`, no flush,
just like a power cut or an OOM kill. `LANGGRAPH_DURABLE_CRASH_AFTER=<n>` lets the first
n passes through the point go by. The variables are read once, when this module is first
imported (a crash test sets them in the worker's environment before it starts), so outside
tests a check costs one comparison.
"""

from __future__ import annotations

import os
import signal
import sys

__all__ = ["reached"]

_passes: dict[str, int] = {}
_WANTED = frozenset(filter(None, os.environ.get("LANGGRAPH_DURABLE_CRASH_AT", "").split(",")))
_AFTER = int(os.environ.get("LANGGRAPH_DURABLE_CRASH_AFTER", "0") or 0)


def reached(point: str) -> None:
    """SIGKILL this process if a test asked to crash at `point`."""
    if not _WANTED or point not in _WANTED:
        return
    seen = _passes.get(point, 0)
    _passes[point] = seen + 1
    if seen < _AFTER:
        return
    sys.stdout.flush()
    sys.stderr.flush()
    os.kill(os.getpid(), signal.SIGKILL)
