"""Named points where a test can make this process die, to prove crash claims for real.

A crash test starts a worker with `LANGGRAPH_DURABLE_CRASH_AT=<point>` (or a comma list);
when the worker reaches that point it SIGKILLs itself: no `finally`, no `atexit`, no flush,
just like a power cut or an OOM kill. `LANGGRAPH_DURABLE_CRASH_AFTER=<n>` lets the first
n passes through the point go by. Outside tests the variable is unset and a check costs
one dict lookup.
"""

from __future__ import annotations

import os
import signal
import sys

__all__ = ["reached"]

_passes: dict[str, int] = {}


def reached(point: str) -> None:
    """SIGKILL this process if a test asked to crash at `point`."""
    wanted = os.environ.get("LANGGRAPH_DURABLE_CRASH_AT")
    if not wanted or point not in wanted.split(","):
        return
    seen = _passes.get(point, 0)
    _passes[point] = seen + 1
    if seen < int(os.environ.get("LANGGRAPH_DURABLE_CRASH_AFTER", "0")):
        return
    sys.stdout.flush()
    sys.stderr.flush()
    os.kill(os.getpid(), signal.SIGKILL)
