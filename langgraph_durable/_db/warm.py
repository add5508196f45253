"""One connection kept between calls, out of a pool the saver opened itself.

A call that borrows from a `ConnectionPool` and gives the connection back pays the pool's
bookkeeping twice (its lock, its deque, its checks on return), and the code of the pool
falls out of the CPU caches between two calls of one step. Against upstream's
`from_conn_string`, which holds one bare connection, that cost a sync step about 5% (paired
A/Bs on the 10-node graph: 0.12 ms of CPU per step). So the sources of a pool that
`open_pool` opened keep the last connection given back in a slot of one, and the next call
takes it from there without asking the pool.

The slot never holds a connection someone else is waiting for: a borrower that finds it
empty is counted until the pool has served it, and a connection is kept only while that
count is 0; otherwise it goes back to the pool, which hands it to the waiter. Only pools
the saver opened have a slot: a pool the caller passed may be shared with code that
borrows from it directly, which this count cannot see.

A kept connection is given back to its pool when it is not idle (a transaction left open,
a broken session: the pool resets or replaces it), when it has been out of the pool for
the pool's `max_lifetime` (so the pool still renews its connections), after a lost
connection (`drop_dead_connections`: the pool checks it with the others) and when the
pool closes (`take_for_close`). A kept connection idle for `CHECK_IDLE_AFTER` is checked
when taken, like one lent by the pool.

Hand-written and without I/O: both connection sources call it, and the caller does the
pool's calls (sync or async) with what it returns.
"""

from __future__ import annotations

import threading
import time
import weakref
from typing import Any

from psycopg.pq import TransactionStatus

__all__ = ["WARM", "WarmSlot", "WarmSlots"]


class WarmSlot:
    """The slot of one pool: at most one kept connection, and the number of borrowers that
    found the slot empty and wait for the pool."""

    def __init__(self, max_lifetime: float) -> None:
        self._lock = threading.Lock()
        self._kept: tuple[Any, float] | None = None
        self._in_pool = 0
        self._closed = False
        self._max_lifetime = max_lifetime

    def take(self) -> tuple[Any, float] | None:
        """The kept connection and when it left the pool; or None, and the caller is
        counted as going to the pool until it calls `served`."""
        with self._lock:
            kept = self._kept
            if kept is not None:
                self._kept = None
                return kept
            self._in_pool += 1
            return None

    def served(self) -> float:
        """A borrower counted by `take` has its connection from the pool, or gave up;
        returns the time (`time.monotonic()`) its connection left the pool."""
        with self._lock:
            self._in_pool -= 1
        return time.monotonic()

    def keep(self, conn: Any, out_since: float) -> bool:
        """Keep `conn` (out of the pool since `out_since`, `time.monotonic()`) for the next
        call; False when it must go back to the pool."""
        if conn.pgconn.transaction_status != TransactionStatus.IDLE:
            return False  # a transaction left open, or a broken session: the pool's to fix
        if time.monotonic() - out_since >= self._max_lifetime:
            return False  # the pool renews it
        with self._lock:
            if self._closed or self._kept is not None or self._in_pool:
                return False
            self._kept = (conn, out_since)
            return True

    def discard(self) -> Any | None:
        """Take the kept connection away (to be given back to the pool), if any."""
        with self._lock:
            kept, self._kept = self._kept, None
        return None if kept is None else kept[0]

    def take_for_close(self) -> Any | None:
        """Keep nothing from now on; the kept connection, to be given back before the
        pool closes."""
        with self._lock:
            self._closed = True
        return self.discard()


class WarmSlots:
    """The slot of each pool that has one, by pool. Weak, though a kept connection refers
    to its pool: the pools with a slot are opened and closed by `from_conn_string`, whose
    exit empties the slot (`take_for_close`) before closing the pool."""

    def __init__(self) -> None:
        self._slots: weakref.WeakKeyDictionary[Any, WarmSlot] = weakref.WeakKeyDictionary()

    def open(self, pool: Any) -> None:
        """Give `pool` a slot (`open_pool`, for the pools the saver opens)."""
        self._slots[pool] = WarmSlot(pool.max_lifetime)

    def of(self, pool: Any) -> WarmSlot | None:
        """The slot of `pool`, or None for a pool without one (the caller's)."""
        return self._slots.get(pool)


WARM = WarmSlots()
