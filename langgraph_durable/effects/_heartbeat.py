"""Keeping an attempt's lease alive while a long call runs.

Without it, a call that outlives `lease_ttl` looks dead to workers on other hosts, which
would then stop with `EffectOutcomeUnknown`. The heartbeat extends the lease every third of
the lease; it stops when the call returns or raises. A failed extension is logged, not
raised: the call itself is what matters, and an expired lease is handled safely anyway.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import AsyncIterator, Iterator
from typing import Any

__all__ = ["AsyncHeartbeat", "Heartbeat"]

logger = logging.getLogger("langgraph_durable.effects")


class AsyncHeartbeat:
    """Extends a lease from a task on the running loop while the `async with` body runs."""

    def __init__(self, journal: Any, key: str, attempt: int, lease_seconds: float) -> None:
        self._journal, self._key, self._attempt = journal, key, attempt
        self._lease = lease_seconds

    async def _beat(self) -> None:
        while True:
            await asyncio.sleep(self._lease / 3)
            try:
                await self._journal.aextend_lease(self._key, self._attempt, self._lease)
            except Exception as exc:
                logger.warning("could not extend the lease of %s: %s", self._key, exc)

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        task = asyncio.create_task(self._beat())
        try:
            yield
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


class Heartbeat:
    """Extends a lease from a daemon thread while the `with` body runs."""

    def __init__(self, journal: Any, key: str, attempt: int, lease_seconds: float) -> None:
        self._journal, self._key, self._attempt = journal, key, attempt
        self._lease = lease_seconds
        self._stop = threading.Event()

    def _beat(self) -> None:
        while not self._stop.wait(self._lease / 3):
            try:
                self._journal.extend_lease(self._key, self._attempt, self._lease)
            except Exception as exc:
                logger.warning("could not extend the lease of %s: %s", self._key, exc)

    @contextlib.contextmanager
    def running(self) -> Iterator[None]:
        thread = threading.Thread(target=self._beat, name=f"lease:{self._key}", daemon=True)
        thread.start()
        try:
            yield
        finally:
            self._stop.set()
            thread.join()
