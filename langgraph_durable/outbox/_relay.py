"""The relay: publishes committed outbox events, at least once, in order per key.

One round (`run_once`) is one transaction: claim the oldest pending event of up to `keys`
keys with `FOR UPDATE SKIP LOCKED` (and the events queued behind them), publish them
with the event id as message id, mark the published ones and record the failures, then
commit. Each mark runs in a savepoint, so one that fails leaves its events pending and
cannot undo the others'. The row locks held during the round are what lets any number
of relays run at once: a key's events go through one relay at a time, in `seq` order
among those committed when it claims them (an event that commits later with a lower
`seq` goes out later). A relay that dies mid-round (SIGKILL, lost connection) releases
its locks without marking anything: the next round publishes those events again, under
the same ids, and consumers drop the repeats (`inbox_record_txn`). A failed publish
stops its key for this round; the event is tried again after a backoff and moved to
'dead' after `max_attempts` failures (a dead event no longer holds its key back;
`replay_dead` brings it back). A failure to reach the broker at all
(`is_transport_error`) is no failure of the event: it keeps its attempts and its place,
and the whole relay pauses, longer each round, until a round reaches the broker again;
it logs the outage once. Waiting for a broker connection (a publisher's `connect()`) is
not publish time: it is bounded on its own, and running out is an outage.

A round's transaction is idle while it publishes, so its session has a finite
`idle_in_transaction_session_timeout` (`idle_limit_ms`): no publish starts later than
one `publish_timeout` into the round, so a live round is never idle longer than three
of them, and a relay frozen mid-round (SIGSTOP, a paused VM) loses its session and its
locks after four; another relay then publishes its keys.

Between rounds the relay waits on LISTEN/NOTIFY (a trigger notifies on every insert),
for the next backoff to run out, `idle_wait` seconds, or `run()`'s stop, whichever comes
first. Relays
publish through async clients, so there is one relay, async; `run_relay` runs it from
sync code.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import psycopg
from psycopg import AsyncConnection
from typing_extensions import LiteralString

from langgraph_durable import _crashpoints, _telemetry
from langgraph_durable._db import CONNECTION_KWARGS, cannot_connect, check_dsn
from langgraph_durable._sql import QUERIES
from langgraph_durable.errors import (
    ConfigurationError,
    ConnectionLostError,
    DatabaseUnreachableError,
    DurableError,
)
from langgraph_durable.outbox._aoutbox import abacklog
from langgraph_durable.outbox._base import (
    BrokerUnreachableError,
    OutboxEvent,
    backoff_delay,
    error_text,
    event_of,
    is_transport_error,
)
from langgraph_durable.outbox._relay_db import lost, lost_mid_round, refused_for_good, stopped_by

__all__ = ["OutboxRelay", "Publisher", "RoundResult"]

logger = logging.getLogger("langgraph_durable.outbox")

DB_PAUSE_BASE = 0.1
DB_PAUSE_CAP = 10.0
"""`run()`'s pause after losing the database: DB_PAUSE_BASE seconds, doubled per loss
in a row, up to DB_PAUSE_CAP."""


class Publisher(Protocol):
    """Sends one event to a broker and returns once the broker has it (or raises).

    Raise `BrokerUnreachableError` (or `ConnectionRefusedError`) when the broker could
    not be reached and nothing was sent: that spends none of the event's attempts
    (`is_transport_error`); any other error counts against the event.

    A publisher may also have a coroutine method `connect()` that returns once it can
    publish (or raises `BrokerUnreachableError`); the relay awaits it before a key's
    first publish of the round, outside that publish's `publish_timeout`, so time spent
    connecting is not counted against an event (the broker publishers have one; a
    connection lost later in the round is opened again within the next publish).
    """

    async def publish(self, event: OutboxEvent) -> None: ...


@dataclass(frozen=True)
class RoundResult:
    """What one relay round did.

    `failed` counts every failed publish; `unreachable` those of them that failed because
    the broker could not be reached (not counted against their events); `dead` the
    events that used up their attempts.
    """

    claimed: int
    published: int
    failed: int
    dead: int
    unreachable: int = 0


class OutboxRelay:
    """Publishes the outbox of one database through one publisher.

    Args:
        dsn: The database of the outbox.
        publisher: Where events go (`RabbitMQPublisher`, `NatsPublisher`,
            `WebhookPublisher`, `CallbackPublisher`, or your own `publish` coroutine).
        keys: Keys claimed per round.
        batch: Events claimed per round, at most.
        max_attempts: Failed publishes after which an event is dead; a broker that
            cannot be reached (`is_transport_error`) spends none.
        backoff_base: Seconds before the first retry; doubled per failure. Also the
            relay's first pause when it cannot reach the broker, doubled per round.
        backoff_cap: The longest wait between retries, or between rounds while the
            broker cannot be reached, in seconds.
        publish_timeout: Seconds a publish may take before it counts as failed; also
            the longest wait for a broker connection (an outage), and what the round's
            length and its session's idle limit follow from (`idle_limit_ms`).
        idle_wait: Seconds between looks when no notification comes.
    """

    def __init__(
        self,
        dsn: str,
        publisher: Publisher,
        *,
        keys: int = 100,
        batch: int = 500,
        max_attempts: int = 10,
        backoff_base: float = 1.0,
        backoff_cap: float = 300.0,
        publish_timeout: float = 30.0,
        idle_wait: float = 5.0,
    ) -> None:
        counts = (keys, batch, max_attempts)
        if not all(isinstance(n, int) and not isinstance(n, bool) and n >= 1 for n in counts):
            raise ConfigurationError(
                "OutboxRelay: give keys, batch and max_attempts as whole numbers >= 1"
            )
        seconds = (backoff_base, backoff_cap, publish_timeout, idle_wait)
        if not all(
            isinstance(n, (int, float)) and not isinstance(n, bool) for n in seconds
        ) or not (
            backoff_base >= 0 and backoff_cap >= 0 and 0 < publish_timeout < 86400 and idle_wait > 0
        ):
            raise ConfigurationError(
                "OutboxRelay: give backoff_base and backoff_cap >= 0, publish_timeout (under a "
                "day) and idle_wait > 0 (seconds)"
            )
        self.dsn = check_dsn(dsn)
        self.publisher = publisher
        self.keys = keys
        self.batch = batch
        self.max_attempts = max_attempts
        self.backoff_base = backoff_base
        self.backoff_cap = backoff_cap
        self.publish_timeout = publish_timeout
        self.idle_wait = idle_wait
        self._conn: AsyncConnection[Any] | None = None
        self._outage_rounds = 0
        """Rounds in a row that could not reach the broker."""
        self._db_losses = 0
        """Times in a row `run()` lost the database with no round going through between."""
        self._unreachable_keys: set[str] = set()
        """Keys whose publish could not reach the broker during the current outage."""
        self._connected = False
        """Whether the relay ever reached its database: a refusal before is final."""
        self._limit_warned = False

    @property
    def idle_limit_ms(self) -> int:
        """The `idle_in_transaction_session_timeout` the relay wants for its session: four
        `publish_timeout`s (at least a second). A round starts no connect or publish
        after one `publish_timeout`, and each takes at most one more, so a live round is
        idle for at most three. A lower limit set for the server, the database, the role
        or in the DSN stays in force (`outbox_relay_session`)."""
        return max(1000, math.ceil(4000 * self.publish_timeout))

    async def _connect_db(self) -> AsyncConnection[Any]:
        """A new connection to the outbox's database.

        A server that refuses the relay for good before it ever connected (the database
        or the role does not exist, authentication failed) raises a named error: such a
        refusal has no SQLSTATE, like a lost connection, and `run()` retried it forever.
        Every other failure to connect (the server down, restarting, out of connections)
        is raised as it is, an outage `run()` waits out.
        """
        try:
            conn = await AsyncConnection.connect(self.dsn, **CONNECTION_KWARGS)
        except psycopg.OperationalError as exc:
            if not self._connected and refused_for_good(exc):
                raise cannot_connect(self.dsn, exc) from exc
            raise
        self._connected = True
        return conn

    async def _connection(self) -> AsyncConnection[Any]:
        if self._conn is None or self._conn.closed or self._conn.broken:
            await self.aclose()  # a broken one too: None while connecting (`run_once`)
            conn = await self._connect_db()
            try:
                cur = await conn.execute(
                    QUERIES["outbox_relay_session"], {"limit_ms": self.idle_limit_ms}
                )
                row = await cur.fetchone()
            except BaseException:
                await conn.close()
                raise
            self._conn = conn
            if row is not None and row["limit_ms"] < self.idle_limit_ms:
                self._warn_idle_limit(int(row["limit_ms"]))
        return self._conn

    def _warn_idle_limit(self, limit_ms: int) -> None:
        if self._limit_warned:
            return
        self._limit_warned = True
        logger.warning(
            "outbox relay: the session's idle_in_transaction_session_timeout is %d ms, set "
            "for the server, database, role or DSN; a round may be idle up to %d ms "
            "(3 x publish_timeout) while it publishes, and one that outlasts the limit loses "
            "its session and publishes its events again. Raise it for the relay's role "
            "(ALTER ROLE ... SET idle_in_transaction_session_timeout = '%ds') or lower "
            "publish_timeout.",
            limit_ms,
            math.ceil(3000 * self.publish_timeout),
            math.ceil(self.idle_limit_ms / 1000),
        )

    async def aclose(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            await conn.close()

    async def run_once(self) -> RoundResult:
        """Claim, publish and mark one round of events, in one transaction.

        Raises:
            DurableError: A database error, named: `DatabaseUnreachableError` when the
                database cannot be reached, `ConnectionLostError` when the connection
                died during the round, `SchemaNotReadyError` before `setup()`, else an
                `OutboxRelayError` quoting the server. Events not marked published stay
                pending and go out again, under the same ids.
        """
        try:
            return await self._round()
        except psycopg.Error as exc:
            if isinstance(exc, DurableError):
                raise  # named already
            if not lost(exc):
                raise stopped_by(exc) from exc
            if self._conn is None and isinstance(exc, psycopg.OperationalError):
                raise cannot_connect(self.dsn, exc) from exc  # no connection to begin with
            await self.aclose()
            raise ConnectionLostError(lost_mid_round(exc)) from exc

    async def _round(self) -> RoundResult:
        conn = await self._connection()
        async with conn.transaction():
            cur = await conn.execute(
                QUERIES["outbox_claim"], {"keys": self.keys, "limit": self.batch}
            )
            events = [event_of(row) for row in await cur.fetchall()]
            if not events:
                return RoundResult(0, 0, 0, 0)
            by_key: dict[str, list[OutboxEvent]] = {}
            for event in events:
                by_key.setdefault(event.key, []).append(event)
            # No connect or publish starts after one publish_timeout: the round's
            # transaction stays within its session's idle limit (`idle_limit_ms`); what
            # is left stays pending for the next round.
            deadline = asyncio.get_running_loop().time() + self.publish_timeout
            outcomes = await self._publish_keys(list(by_key.values()), deadline)
            failures = [failure for _, failure in outcomes if failure is not None]
            _crashpoints.reached("relay:after_publish")
            published = await self._mark_published(conn, [done for done, _ in outcomes if done])
            unreachable = [failure for failure in failures if is_transport_error(failure[1])]
            dead = 0
            for event, error in failures:
                if is_transport_error(error):
                    await self._mark(
                        conn,
                        QUERIES["outbox_mark_unreachable"],
                        {"seq": event.seq, "error": error_text(error)[:2000]},
                        [event],
                    )
                    continue
                rows = await self._mark(
                    conn,
                    QUERIES["outbox_mark_failed"],
                    {
                        "seq": event.seq,
                        "error": error_text(error)[:2000],
                        "delay": backoff_delay(
                            event.attempts + 1, base=self.backoff_base, cap=self.backoff_cap
                        ),
                        "max_attempts": self.max_attempts,
                    },
                    [event],
                )
                if rows and rows[0]["status"] == "dead":
                    dead += 1
                    logger.error(
                        "outbox event %s (%s) is dead after %d attempts: %s",
                        event.event_id,
                        event.event_type,
                        event.attempts + 1,
                        error_text(error),
                    )
        _crashpoints.reached("relay:after_commit")
        self._note_outage(unreachable)
        return RoundResult(len(events), published, len(failures), dead, len(unreachable))

    def _note_outage(self, unreachable: Sequence[tuple[OutboxEvent, BaseException]]) -> None:
        """Count rounds that could not reach the broker; log when an outage starts and
        when it ends, not once per event and round (a long outage flooded the log)."""
        if unreachable and not self._outage_rounds:
            logger.warning(
                "outbox relay cannot reach the broker (%s); events stay pending with their "
                "attempts untouched, and the relay tries again with a growing pause",
                error_text(unreachable[0][1]),
            )
        elif not unreachable and self._outage_rounds:
            logger.warning(
                "outbox relay reaches the broker again, after %d round(s) that could not",
                self._outage_rounds,
            )
        self._outage_rounds = self._outage_rounds + 1 if unreachable else 0
        if unreachable:
            self._unreachable_keys.update(event.key for event, _ in unreachable)
        else:
            self._unreachable_keys.clear()

    def _outage_pause(self) -> float:
        """Seconds `run()` waits before the next round while the broker cannot be
        reached: `backoff_base` doubled per such round, up to `backoff_cap`; 0 otherwise."""
        return backoff_delay(self._outage_rounds, base=self.backoff_base, cap=self.backoff_cap)

    async def _mark_published(
        self, conn: AsyncConnection[Any], by_key: Sequence[Sequence[OutboxEvent]]
    ) -> int:
        """Mark the published events of every key; returns how many were marked.

        One statement for the round; if it fails, one per key, so that a key whose mark
        fails cannot undo the others' (a key's published events are marked together, as
        marking a later one without an earlier one would publish them out of order).
        """
        every = [event for events in by_key for event in events]
        if not every:
            return 0
        query = QUERIES["outbox_mark_published"]
        seqs = [event.seq for event in every]
        if len(by_key) > 1 and await self._mark(conn, query, {"seqs": seqs}, every, quiet=True):
            return len(every)
        marked = 0
        for events in by_key:
            if await self._mark(conn, query, {"seqs": [e.seq for e in events]}, events):
                marked += len(events)
        return marked

    async def _mark(
        self,
        conn: AsyncConnection[Any],
        query: LiteralString,
        params: dict[str, Any],
        events: Sequence[OutboxEvent],
        *,
        quiet: bool = False,
    ) -> list[Any] | None:
        """Run one marking statement in a savepoint: its rows, or None when it failed.

        A failing statement (a value Postgres refuses, a trigger, a statement timeout)
        undoes only itself: the round's other marks commit, and the events it was about
        stay pending, to be published again (consumers drop the repeats). Before, one
        failing mark rolled back the whole round, whose events were then published again
        on every round while their attempts never rose. A lost connection still ends the
        round (`run()` waits it out).
        """
        try:
            async with conn.transaction():  # a savepoint inside the round's transaction
                cur = await conn.execute(query, params)
                return list(await cur.fetchall()) if cur.description else [True]
        except psycopg.Error as exc:
            if lost(exc):
                raise
            if not quiet:
                logger.error(
                    "outbox relay could not record what happened to event(s) %s, which stay "
                    "pending and will be published again: %s",
                    ", ".join(event.event_id for event in events),
                    exc,
                )
            return None

    async def _publish_keys(
        self, keys: Sequence[Sequence[OutboxEvent]], deadline: float
    ) -> list[tuple[list[OutboxEvent], tuple[OutboxEvent, BaseException] | None]]:
        """Publish each key's events in order, the keys at once. While the broker cannot
        be reached, one key goes first and the others only if it got through: a round
        during an outage makes one connection attempt, not one per key (the keys not
        tried stay pending as they were). The key that goes first goes round the keys (one
        not refused yet in this outage): always the first key, one event whose own
        publish looked like an outage held every other key back."""
        if self._outage_rounds:
            fresh = [i for i, k in enumerate(keys) if k[0].key not in self._unreachable_keys]
            if not fresh:  # every key refused once: start the round over
                self._unreachable_keys.clear()
            probe = fresh[0] if fresh else 0
            first = await self._publish_key(keys[probe], deadline)
            if first[1] is not None and is_transport_error(first[1][1]):
                return [first]
            others = [k for i, k in enumerate(keys) if i != probe]
            return [
                first,
                *await asyncio.gather(*(self._publish_key(k, deadline) for k in others)),
            ]
        return list(await asyncio.gather(*(self._publish_key(k, deadline) for k in keys)))

    async def _publish_key(
        self, events: Sequence[OutboxEvent], deadline: float
    ) -> tuple[list[OutboxEvent], tuple[OutboxEvent, BaseException] | None]:
        done: list[OutboxEvent] = []
        loop = asyncio.get_running_loop()
        for event in events:
            if loop.time() >= deadline:
                break  # the rest stays pending, untouched, for the next round
            attributes: dict[str, str | int] = {
                "langgraph_durable.event_id": event.event_id,
                "langgraph_durable.event_type": event.event_type,
                "langgraph_durable.event_key": event.key,
                "langgraph_durable.attempt": event.attempts + 1,
            }
            with _telemetry.span("langgraph_durable.outbox.publish", attributes):
                try:
                    if not done:  # once per key: no second wait_for per event
                        await self._connect_publisher()
                    await self._publish(event)
                except Exception as exc:  # retried later; dead after max_attempts, unless
                    unreachable = is_transport_error(exc)  # the broker could not be reached
                    logger.log(
                        logging.DEBUG if unreachable else logging.WARNING,  # an outage: once
                        "publishing outbox event %s failed: %s",
                        event.event_id,
                        error_text(exc),
                    )
                    _telemetry.annotate({"langgraph_durable.error_type": type(exc).__name__})
                    _count_publish(event, "unreachable" if unreachable else "failed")
                    return done, (event, exc)
            _count_publish(event, "published")
            done.append(event)
        return done, None

    async def _connect_publisher(self) -> None:
        """The publisher's `connect()`, if it has one, bounded by `publish_timeout` but
        never counted against an event: running out is an outage."""
        connect = getattr(self.publisher, "connect", None)
        if not inspect.iscoroutinefunction(connect):
            return
        try:
            await asyncio.wait_for(connect(), self.publish_timeout)
        except asyncio.TimeoutError as exc:
            raise BrokerUnreachableError(
                f"cannot connect to the broker: no connection within publish_timeout "
                f"({self.publish_timeout:g} s)"
            ) from exc

    async def _publish(self, event: OutboxEvent) -> None:
        try:
            await asyncio.wait_for(self.publisher.publish(event), self.publish_timeout)
        except asyncio.TimeoutError as exc:
            if exc.args:
                raise  # the client's own timeout, with its own message
            # asyncio's is blank: the stored error said "TimeoutError: " and nothing else.
            raise asyncio.TimeoutError(
                f"publish_timeout ({self.publish_timeout:g} s) exceeded"
            ) from exc

    async def _areport_backlog(self) -> None:
        """The backlog as gauges, each time the relay has caught up (telemetry extra)."""
        if not _telemetry.enabled():
            return
        found = await abacklog(await self._connection())
        _telemetry.gauge(
            "langgraph_durable.outbox.backlog", found["pending"], {"status": "pending"}
        )
        _telemetry.gauge("langgraph_durable.outbox.backlog", found["dead"], {"status": "dead"})
        _telemetry.gauge(
            "langgraph_durable.outbox.oldest_pending_age",
            found["oldest_pending_seconds"],
            {},
            unit="s",
        )

    async def _seconds_to_next_due(self) -> float | None:
        conn = await self._connection()
        cur = await conn.execute(QUERIES["outbox_next_due"])
        row = await cur.fetchone()
        return None if row is None or row["seconds"] is None else max(0.0, row["seconds"])

    async def run(self, stop: asyncio.Event | None = None) -> None:
        """Publish until `stop` is set: rounds while there is work, then wait for more.

        Returns once `stop` is set, at once when waiting (for work, a broker or the
        database), else when the round under way ends. A lost database connection is
        waited out with a growing pause (`_db_pause`), which starts over once a round
        goes through.

        Raises:
            DurableError: A database error waiting will not cure, named (e.g.
                `SchemaNotReadyError`) or an `OutboxRelayError` quoting the server; the
                events it had not marked stay pending.
        """
        stop = stop or asyncio.Event()
        self._db_losses = 0
        try:
            while not stop.is_set():
                try:
                    await self._serve(stop)
                except (psycopg.Error, ConnectionLostError) as exc:
                    if not self._waited_out(exc):
                        if isinstance(exc, DurableError):
                            raise  # named already (ours are also psycopg's classes)
                        raise stopped_by(exc) from exc
                    logger.warning("outbox relay lost the database (%s); retrying", exc)
                    await self.aclose()
                    self._db_losses += 1
                    with contextlib.suppress(asyncio.TimeoutError):
                        await asyncio.wait_for(stop.wait(), self._db_pause())
        finally:  # also when it stops on an error: its session left open before
            await self.aclose()

    def _db_pause(self) -> float:
        """Seconds `run()` waits before reconnecting after losing the database:
        `DB_PAUSE_BASE` doubled per loss since the last round that went through, up to
        `DB_PAUSE_CAP`. The pause used to grow for the life of the relay: after a few
        outages, every later one waited the longest pause before its first retry."""
        return backoff_delay(self._db_losses, base=DB_PAUSE_BASE, cap=DB_PAUSE_CAP)

    def _waited_out(self, exc: BaseException) -> bool:
        """Whether `run()` waits `exc` out: a lost connection, or a connect the server
        refused for now (down, restarting, out of connections: `run_once` names it
        `DatabaseUnreachableError`), not one it refused for good before the relay ever
        connected (`_connect_db`)."""
        if lost(exc):
            return True
        cause = exc.__cause__
        return (
            isinstance(exc, DatabaseUnreachableError)
            and isinstance(cause, psycopg.OperationalError)
            and not (refused_for_good(cause) and not self._connected)
        )

    async def _serve(self, stop: asyncio.Event) -> None:
        async with await self._connect_db() as listener:
            await listener.execute(QUERIES["outbox_listen"])
            while not stop.is_set():
                result = await self.run_once()
                self._db_losses = 0  # the database works: a later loss starts over
                if result.unreachable:  # new events would not help: wait for the broker
                    with contextlib.suppress(asyncio.TimeoutError):
                        await asyncio.wait_for(stop.wait(), self._outage_pause())
                    continue
                if result.claimed:
                    continue
                await self._areport_backlog()
                due = await self._seconds_to_next_due()
                wait = self.idle_wait if due is None else min(self.idle_wait, due)
                if wait <= 0 or stop.is_set():
                    continue
                await _notified_or_stopped(listener, wait, stop)


async def _notified_or_stopped(
    listener: AsyncConnection[Any], wait: float, stop: asyncio.Event
) -> None:
    """Return at the first NOTIFY, after `wait` seconds, or once `stop` is set, whichever
    comes first. The wait used to look at NOTIFY alone: a relay stopped while idle
    returned only after `idle_wait` (or its next backoff) ran out. A driver error of the
    wait (a lost connection) is raised, for `run()` to wait out."""

    async def notified() -> None:
        async for _ in listener.notifies(timeout=wait, stop_after=1):
            pass

    waits = [asyncio.ensure_future(notified()), asyncio.ensure_future(stop.wait())]
    try:
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    finally:  # also when run() itself is cancelled: leave no wait behind
        for pending in waits:
            pending.cancel()
        outcomes = await asyncio.gather(*waits, return_exceptions=True)
    for outcome in outcomes:
        if isinstance(outcome, Exception):  # not the waits cancelled above
            raise outcome


def _count_publish(event: OutboxEvent, outcome: str) -> None:
    _telemetry.count(
        "langgraph_durable.outbox.publishes",
        1,
        {"event_type": event.event_type, "outcome": outcome},
        "Outbox publish attempts by outcome (published, failed, unreachable)",
    )
