"""One connection kept between calls by the pools the saver opens (`WarmPool`).

A call that borrows from a `ConnectionPool` and gives the connection back pays the pool's
bookkeeping twice (its lock, its deque, its timing and checks on return), and the pool's
code falls out of the CPU caches between two calls of one step; upstream's
`from_conn_string` holds one bare connection and pays none of it. So the pools
`open_pool` opens (`_asource.AsyncWarmPool` and its sync twin) keep the last connection
given back in a slot of one, and lend it again without their bookkeeping.

The slot never holds a connection someone waits for: a borrower that finds it empty is
counted until the pool has served it, and a connection is kept only while that count is
0; otherwise it goes back into the pool, which hands it to the waiter. Every borrower
that may wait goes through the pool's `getconn` (the saver's sources once `lend` gave
them nothing, and code that borrows from `saver.conn` directly), so every one is counted;
`lend` hands over only a connection that is kept, which no one waits for.

A connection is not kept when it is not idle (a transaction left open, a broken session:
the pool resets or replaces it), once it is older than 95% of the pool's `max_lifetime`
(the earliest the pool may retire it: it draws each connection's lifetime between 95% and
100%), when it was made before the last `drain()`, or once the pool closes. `drain()` and
`check()` take the kept connection back into the pool first.

The sources go one step further (`lend`): a connection kept less than `CHECK_IDLE_AFTER`
ago needs no check that the server still holds its session, and the slot says whether
its session has the timeouts wanted now (then the source sets none, and does not look
them up either). The slot remembers when it kept the connection and with which timeouts
(a source gives them with it, `give_back`; a connection given back through the pool's
`putconn` is kept with them unknown).

Hand-written and without I/O: both pools call it, and do the pool's calls (sync or async)
with what it returns.
"""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Mapping
from typing import Any

from psycopg.pq import TransactionStatus

from langgraph_durable._db import connections

__all__ = ["WarmSlot"]


class WarmSlot:
    """The slot of one pool: at most one kept connection, the number of borrowers that
    found it empty and wait for the pool, and when each of the pool's connections was
    made (`born`, from the pool's `configure` callback)."""

    def __init__(self, max_lifetime: float) -> None:
        self._lock = threading.Lock()
        self._kept: Any | None = None
        self._kept_at = 0.0
        self._kept_settings: Mapping[str, int] | None = None
        self._in_pool = 0
        self._closed = False
        self._max_age = 0.95 * max_lifetime
        self._drained_at = -float("inf")
        self._born: weakref.WeakKeyDictionary[Any, float] = weakref.WeakKeyDictionary()

    @property
    def kept(self) -> Any | None:
        """The connection kept now, if any."""
        return self._kept

    def born(self, conn: Any) -> None:
        """The pool made `conn` just now."""
        self._born[conn] = time.monotonic()

    def drained(self) -> None:
        """The pool is drained: keep no connection made before now."""
        self._drained_at = time.monotonic()

    def take(self) -> Any | None:
        """The kept connection; or None, and the caller is counted as waiting for the pool
        until it calls `served`."""
        with self._lock:
            kept = self._kept
            if kept is not None:
                self._kept = None
                return kept
            self._in_pool += 1
            return None

    def lend(self, settings: Mapping[str, int]) -> tuple[Any, bool] | None:
        """The kept connection if it was kept less than `CHECK_IDLE_AFTER` ago, and whether
        its session already has `settings` (the timeouts a source wants); None otherwise,
        without counting the caller: it borrows the usual way (`take`, through the pool),
        which checks a connection idle for longer."""
        with self._lock:
            kept = self._kept
            if kept is None or time.monotonic() - self._kept_at >= connections.CHECK_IDLE_AFTER:
                return None
            self._kept = None
            return kept, self._kept_settings == settings

    def served(self) -> None:
        """A borrower counted by `take` has its connection from the pool, or gave up."""
        with self._lock:
            self._in_pool -= 1

    def keep(self, conn: Any, settings: Mapping[str, int] | None = None) -> bool:
        """Keep `conn` for the next borrower; False when it must go back into the pool.
        `settings`: the timeouts its session has, if known (a source giving it back)."""
        if conn.pgconn.transaction_status != TransactionStatus.IDLE:
            return False  # a transaction left open, or a broken session: the pool's to fix
        born = self._born.get(conn)
        now = time.monotonic()
        if born is None or born <= self._drained_at or now - born >= self._max_age:
            return False  # the pool renews it (or it was made before the slot knew)
        with self._lock:
            if self._closed or self._kept is not None or self._in_pool:
                return False
            # A copy: the slot must not see later changes to the caller's mapping.
            self._kept_settings = None if settings is None else dict(settings)
            self._kept, self._kept_at = conn, now
            return True

    def discard(self) -> Any | None:
        """Take the kept connection away (to go back into the pool), if any."""
        with self._lock:
            kept, self._kept = self._kept, None
        return kept

    def close(self) -> Any | None:
        """Keep nothing from now on; returns the kept connection, to go back into the pool
        before it closes."""
        with self._lock:
            self._closed = True
        return self.discard()
