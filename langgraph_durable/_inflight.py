"""Effects under way, which a worker's SIGTERM lets finish before it stops the graph.

SIGTERM (a deploy, `docker stop`) hands a worker's run back (`runs/_signals.py`). Stopped
in the middle of an `@effect` call, the attempt may have reached its receiver, so it is
journaled `unknown` and the next worker blocks the run until a person resolves it: a
plain deploy would do what a crash does. So an attempt under way is let finish (its
outcome journaled, a replay for the next worker) and the run is stopped right after.

Ctrl-C is not held: a person who interrupts a process means it. A hung receiver holds
the stop until the process is killed, which leaves the attempt as a crash would.

Two shapes, one per flavour of worker:
- a sync worker's handler runs in the main thread, between the graph's bytecodes: if that
  thread is inside an attempt, it leaves its stop (raising `WorkerTerminated`) to the end
  of the attempt (`stop_this_thread_after_effects`);
- an async worker's handler cancels the graph's task: it waits until no attempt is under
  way in the process (`call_when_effects_end`), as a cancel would land in any of them.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

__all__ = ["call_when_effects_end", "effect_under_way", "stop_this_thread_after_effects"]


class _ThisThread(threading.local):
    depth = 0
    stop: Callable[[], None] | None = None


_this_thread = _ThisThread()
_lock = threading.Lock()
_under_way = 0
_waiting: list[Callable[[], None]] = []


class _UnderWay:
    """The context manager of `effect_under_way` (a class: no generator per call)."""

    def __enter__(self) -> None:
        global _under_way
        with _lock:
            _under_way += 1
        _this_thread.depth += 1

    def __exit__(self, *exc_info: object) -> None:
        global _under_way
        _this_thread.depth -= 1
        with _lock:
            _under_way -= 1
            ended = _waiting[:] if _under_way == 0 else []
            if ended:
                _waiting.clear()
        for callback in ended:
            callback()
        stop = _this_thread.stop
        if stop is not None and _this_thread.depth == 0:
            _this_thread.stop = None
            stop()  # raises: the stop a signal handler left to the end of the attempt


_UNDER_WAY = _UnderWay()


def effect_under_way() -> _UnderWay:
    """Around one attempt of an effect: from just before its receiver is called until
    its outcome is journaled."""
    return _UNDER_WAY


def stop_this_thread_after_effects(stop: Callable[[], None]) -> bool:
    """For a signal handler, in the thread it interrupted: False if no attempt is under
    way in it (the handler stops it now); else True, and `stop` (which raises) runs as
    the attempt ends."""
    if _this_thread.depth == 0:
        return False
    _this_thread.stop = stop
    return True


def call_when_effects_end(callback: Callable[[], None]) -> int:
    """If attempts are under way in the process, `callback()` as the last one ends (in
    the thread that ends it), and their number; else 0, and nothing is called."""
    with _lock:
        if _under_way:
            _waiting.append(callback)
        return _under_way
