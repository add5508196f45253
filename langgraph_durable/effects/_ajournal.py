"""The effect journal on Postgres.

Async source: the sync twin is generated from this file.

One row per idempotency key in `langgraph_durable_effects`, in the same database as the
checkpoints. Each write is one statement, conditional on the attempt and status the caller
saw, so only one worker ever owns an attempt, and each commits with synchronous_commit on
whatever the session says (I1). Results are stored with the saver's serializer.

Every write has a `*_txn(conn, ...)` form that runs inside the caller's transaction, so a
change of one's own (an outbox event, a run's status) commits atomically with it; the
methods of `AsyncEffectJournal` open their own connection and call those forms.
"""

from __future__ import annotations

import asyncio
import builtins
import dataclasses
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from typing import Any, TypeVar

from langgraph.checkpoint.serde.base import SerializerProtocol
from psycopg import AsyncConnection, AsyncCursor, pq
from psycopg.rows import DictRow, tuple_row
from typing_extensions import LiteralString

from langgraph_durable._db import (
    AsyncConn,
    AsyncConnectionSource,
    TextArray,
    Timeout,
    aretry_on_disconnect,
    owner_is_dead,
    process_owner,
    register_source,
)
from langgraph_durable._sql import QUERIES, claim_effect, complete_effect, take_over_effect
from langgraph_durable.checkpoint import ParkedEvent, event_params
from langgraph_durable.effects._keys import TaskContext
from langgraph_durable.effects._protocol import (
    NOT_GIVEN,
    RESOLVABLE_STATUSES,
    RESOLVED_AS_FAILED,
    EffectStatus,
    JournalRow,
    Resolution,
    check_resolved,
    choose_resolution,
)
from langgraph_durable.effects._rows import (
    claim_params,
    completion_event_of,
    dump_result,
    error_message_of,
    error_text,
    json_text,
    load_result,
    row_of,
)
from langgraph_durable.serde import clip_text, make_safe, open_text, seal_text

__all__ = [
    "AsyncEffectJournal",
    "aclaim_txn",
    "acomplete_txn",
    "afail_txn",
    "amark_unknown_txn",
    "arelease_txn",
    "atake_over_txn",
    "await_retry_txn",
]

T = TypeVar("T")
PgConn = AsyncConnection[DictRow]


async def _aexecute(
    conn: PgConn, cur: AsyncCursor[Any], query: LiteralString, params: dict[str, Any]
) -> None:
    """Run `query` on `cur` with its results in hand on return: its rows, its columns and
    its row count. On a connection in pipeline mode (a saver made with `pipe=`) those
    arrive at the next sync, so the statement runs in a nested pipeline block, whose end
    syncs."""
    if conn.pgconn.pipeline_status == pq.PipelineStatus.OFF:
        await cur.execute(query, params)
    else:
        async with conn.pipeline():
            await cur.execute(query, params)


async def _afirst_column(conn: PgConn, query: LiteralString, params: dict[str, Any]) -> list[Any]:
    """The first column of each row of a statement that returns rows (`RETURNING`, a final
    `SELECT`): the hot path needs no dict per row, nor the result's column descriptions
    (building them cost about 7% of an `@effect` call's CPU)."""
    cur = conn.cursor(row_factory=tuple_row)
    await _aexecute(conn, cur, query, params)
    return [row[0] for row in await cur.fetchall()]


async def _arow_count(conn: PgConn, query: LiteralString, params: dict[str, Any]) -> int:
    """How many rows a statement wrote (or its final `SELECT` returned): the hot path's
    statements answer with their row count rather than a returned row (which cost an
    `@effect` call about 15 us on the claim and 25 on the completion)."""
    cur = conn.cursor(row_factory=tuple_row)
    await _aexecute(conn, cur, query, params)
    return cur.rowcount


async def _arows(
    conn: PgConn, query: LiteralString, params: dict[str, Any]
) -> list[dict[str, Any]]:
    cur = conn.cursor()
    await _aexecute(conn, cur, query, params)
    return await cur.fetchall() if cur.description else []


async def aclaim_txn(
    conn: PgConn,
    key: str,
    name: str,
    input_hash: str,
    *,
    owner: str,
    lease_seconds: float,
    where: TaskContext | None = None,
    completion_event: str | None = None,
    default_key: bool = False,
) -> int | None:
    """Insert the row for a first attempt; the attempt number (1), or None if the key
    exists."""
    params = claim_params(
        key, name, input_hash, owner, lease_seconds, where, completion_event, default_key
    )
    statement = claim_effect(fenced=params["fence_token"] is not None)
    return 1 if await _arow_count(conn, statement, params) else None


async def atake_over_txn(
    conn: PgConn,
    key: str,
    seen_attempt: int,
    seen_status: EffectStatus,
    *,
    owner: str,
    lease_seconds: float,
    where: TaskContext | None = None,
) -> int | None:
    """Start the next attempt if the row is still as seen, and under a thread lease
    (`where.fence_token`) only while it is the thread's; its number, or None."""
    fence_token = where.fence_token if where else None
    params = {
        "key": key,
        "seen_attempt": seen_attempt,
        "seen_status": seen_status.value,
        "owner": owner,
        "lease_seconds": lease_seconds,
        "thread_id": where.thread_id if where else None,
        "fence_token": fence_token,
    }
    statement = take_over_effect(fenced=fence_token is not None)
    attempts = await _afirst_column(conn, statement, params)
    return int(attempts[0]) if attempts else None


async def acomplete_txn(
    conn: PgConn,
    key: str,
    attempt: int,
    encoded: tuple[str, bytes],
    *,
    usage: dict[str, Any] | None = None,
    seen_statuses: Sequence[EffectStatus] = (EffectStatus.RUNNING,),
    resolved_by: str | None = None,
    events: Sequence[ParkedEvent] = (),
) -> bool:
    """Store a serialized result (`dump_result`); False if the row changed meanwhile.

    `events` (outbox events announcing the completion) are stored in the same statement,
    and only if the result is.
    """
    outbox = event_params(events)
    del outbox["e_task_ids"]
    params = {
        **outbox,
        "key": key,
        "seen_attempt": attempt,
        "seen_statuses": TextArray(s.value for s in seen_statuses),
        "result_type": encoded[0],
        "result": encoded[1],
        "usage": None if usage is None else json_text(usage),
        "resolved_by": resolved_by,
    }
    query = complete_effect(events=bool(events))
    return await _arow_count(conn, query, params) == 1


async def afail_txn(
    conn: PgConn,
    key: str,
    attempt: int,
    error_type: str,
    error_message: str,
    *,
    seen_statuses: Sequence[EffectStatus] = (EffectStatus.RUNNING,),
    resolved_by: str | None = None,
) -> bool:
    """Store a terminal failure; False if the row changed meanwhile."""
    params = {
        "key": key,
        "seen_attempt": attempt,
        "seen_statuses": TextArray(s.value for s in seen_statuses),
        "error_type": error_type,
        "error_message": error_message,
        "resolved_by": resolved_by,
    }
    return bool(await _arows(conn, QUERIES["effect_fail"], params))


async def await_retry_txn(
    conn: PgConn,
    key: str,
    attempt: int,
    *,
    status: EffectStatus,
    delay_seconds: float,
    error: BaseException,
    error_message: str | None = None,
) -> Any:
    """Record a pending retry (`RETRY_WAIT`) or a deferral (`DEFERRED`); its time.
    `error_message` replaces the error's own text (the journal passes it sealed)."""
    params = {
        "key": key,
        "seen_attempt": attempt,
        "status": status.value,
        "delay_seconds": delay_seconds,
        "error_type": type(error).__name__,
        "error_message": error_message_of(error) if error_message is None else error_message,
    }
    rows = await _arows(conn, QUERIES["effect_wait_retry"], params)
    return rows[0]["next_attempt_at"] if rows else None


async def amark_unknown_txn(
    conn: PgConn,
    key: str,
    attempt: int,
    *,
    error_type: str | None = None,
    error_message: str | None = None,
    delay_seconds: float | None = None,
) -> bool:
    """A running attempt's outcome is open: record why, and when to reconcile it; False if
    the attempt was no longer running (finished, or taken over)."""
    params = {
        "key": key,
        "seen_attempt": attempt,
        "error_type": error_type,
        "error_message": clip_text(error_message, 2000),
        "delay_seconds": delay_seconds,
    }
    return bool(await _arows(conn, QUERIES["effect_mark_unknown"], params))


async def arelease_txn(conn: PgConn, key: str, attempt: int, owner: str | None = None) -> None:
    """Control flow (an interrupt) left the call: the next call starts a fresh attempt.
    With `owner`, only if the attempt is that lease owner's."""
    params = {"key": key, "seen_attempt": attempt, "owner": owner}
    await _arows(conn, QUERIES["effect_release"], params)


class AsyncEffectJournal:
    """The journal of effects, in the database of a saver (or a pool, or a connection).

    Args:
        conn: A psycopg `AsyncConnectionPool` or `AsyncConnection` on a database where
            `setup()` has run (or the connection source of a saver).
        serde: How results are stored; by default the JSON-plus serializer LangGraph uses.
        lock_timeout: How long one journal statement may wait for a lock another session
            holds (seconds or a timedelta) before it fails with `LockTimeoutError`; None
            (default) keeps the session's own setting, or the saver's when the journal is
            made on a saver's connections.
        statement_timeout: How long one journal statement may run before it fails with
            `StatementTimeoutError`; None keeps the session's (or the saver's) setting.
    """

    def __init__(
        self,
        conn: AsyncConn | AsyncConnectionSource,
        *,
        serde: SerializerProtocol | None = None,
        lock_timeout: Timeout = None,
        statement_timeout: Timeout = None,
    ) -> None:
        if not isinstance(conn, AsyncConnectionSource):
            conn = AsyncConnectionSource(
                conn, lock_timeout=lock_timeout, statement_timeout=statement_timeout
            )
        elif lock_timeout is not None or statement_timeout is not None:
            conn = conn.with_timeouts(
                lock_timeout=lock_timeout, statement_timeout=statement_timeout
            )
        self._source = conn
        register_source(self, self._source)
        self.serde = make_safe(serde)
        self.owner = process_owner()

    @aretry_on_disconnect
    async def _arun(
        self, doing: str, operation: Callable[..., Awaitable[T]], *args: Any, **kwargs: Any
    ) -> T:
        """One `*_txn` operation on a connection of its own; `doing` names it in errors."""
        async with self._source.connection(doing) as conn:
            return await operation(conn, *args, **kwargs)

    def owner_of(self, call_token: str) -> str:
        """The lease owner of one call: this process, and the call (`owner#token`), so a
        call whose claim committed but whose reply was lost knows the attempt is its own."""
        return f"{self.owner}#{call_token}"

    async def aclaim(
        self,
        key: str,
        name: str,
        input_hash: str,
        lease_seconds: float,
        where: TaskContext | None,
        call_token: str = "",
        completion_event: str | None = None,
        default_key: bool = False,
    ) -> int | None:
        """Insert the row for a first attempt; the attempt number, or None if the key exists.
        The input hash is stored encrypted when the serializer encrypts (`input_hash`);
        `completion_event` is the event type the completion is announced with, kept for a
        completion resolved by hand; `default_key` says the key was derived from the thread
        (no `key=`), so deleting the thread may delete the row."""
        return await self._arun(
            f"claiming effect key {key!r}",
            aclaim_txn,
            key,
            name,
            seal_text(self.serde, input_hash) or input_hash,
            owner=self.owner_of(call_token),
            lease_seconds=lease_seconds,
            where=where,
            completion_event=completion_event,
            default_key=default_key,
        )

    async def aget(self, key: str) -> JournalRow | None:
        rows = await self._arun(
            f"reading effect key {key!r}", _arows, QUERIES["effect_get"], {"key": key}
        )
        if not rows:
            return None
        row = row_of(rows[0])
        return dataclasses.replace(
            row,
            input_hash=open_text(self.serde, row.input_hash) or row.input_hash,
            error_message=open_text(self.serde, row.error_message),
        )

    async def anow(self) -> datetime:
        """The database's clock (`clock_timestamp()`), by which the journal times its rows
        and the run registry its runs; a worker's own clock may be ahead or behind."""
        (now,) = await self._arun(
            "reading the database clock", _afirst_column, QUERIES["effect_clock"], {}
        )
        assert isinstance(now, datetime)
        return now

    async def atake_over(
        self,
        key: str,
        seen_attempt: int,
        seen_status: EffectStatus,
        lease_seconds: float,
        call_token: str = "",
        where: TaskContext | None = None,
    ) -> int | None:
        """Start the next attempt if the row is still as seen (and, under a thread lease,
        while it is held); its number, or None."""
        return await self._arun(
            f"taking over effect key {key!r}",
            atake_over_txn,
            key,
            seen_attempt,
            seen_status,
            owner=self.owner_of(call_token),
            lease_seconds=lease_seconds,
            where=where,
        )

    async def alease_held(self, where: TaskContext) -> bool:
        """Whether the thread lease the call runs under (`where.fence_token`) is still
        held: asked when a fenced claim or takeover changed nothing."""
        if where.fence_token is None:
            return True
        params = {"thread_id": where.thread_id, "fence_token": where.fence_token}
        found = await self._arun(
            f"checking the lease of thread {where.thread_id!r}",
            _afirst_column,
            QUERIES["thread_lease_held"],
            params,
        )
        return bool(found and found[0])

    def dump_result(self, key: str, result: Any) -> tuple[str, bytes]:
        """Serialize a result for the journal, or raise `EffectResultNotStoredError`."""
        return dump_result(self.serde, key, result)

    def load_result(self, row: JournalRow) -> Any:
        return load_result(self.serde, row)

    async def acomplete(
        self,
        key: str,
        attempt: int,
        result: Any,
        *,
        usage: dict[str, Any] | None = None,
        seen_statuses: Sequence[EffectStatus] = (EffectStatus.RUNNING,),
        resolved_by: str | None = None,
        events: Sequence[ParkedEvent] = (),
    ) -> bool:
        """Store the result (and `events`, outbox events announcing it); False if the
        attempt was taken over meanwhile.

        Raises:
            EffectResultNotStoredError: The result cannot be serialized; nothing was written.
        """
        encoded = self.dump_result(key, result)
        return await self._arun(
            f"storing the result of effect key {key!r}",
            acomplete_txn,
            key,
            attempt,
            encoded,
            usage=usage,
            seen_statuses=seen_statuses,
            resolved_by=resolved_by,
            events=events,
        )

    async def afail(
        self,
        key: str,
        attempt: int,
        error_type: str,
        error_message: str,
        *,
        seen_statuses: Sequence[EffectStatus] = (EffectStatus.RUNNING,),
        resolved_by: str | None = None,
    ) -> bool:
        """Store a terminal failure; False if the attempt was taken over meanwhile."""
        return await self._arun(
            f"storing the failure of effect key {key!r}",
            afail_txn,
            key,
            attempt,
            error_text(error_type),
            seal_text(self.serde, error_text(error_message)),
            seen_statuses=seen_statuses,
            resolved_by=resolved_by,
        )

    async def await_retry(
        self,
        key: str,
        attempt: int,
        *,
        status: EffectStatus,
        delay_seconds: float,
        error: BaseException,
    ) -> Any:
        """Record a pending retry (`RETRY_WAIT`) or a deferral (`DEFERRED`); its time."""
        return await self._arun(
            f"scheduling a retry of effect key {key!r}",
            await_retry_txn,
            key,
            attempt,
            status=status,
            delay_seconds=delay_seconds,
            error=error,
            error_message=seal_text(self.serde, error_message_of(error)),
        )

    async def aextend_lease(self, key: str, attempt: int, lease_seconds: float) -> bool:
        """Move a running attempt's lease on; False once the attempt is no longer running."""
        params = {"key": key, "seen_attempt": attempt, "lease_seconds": lease_seconds}
        return bool(
            await self._arun(
                f"extending the lease of effect key {key!r}",
                _arows,
                QUERIES["effect_extend_lease"],
                params,
            )
        )

    async def amark_unknown(
        self,
        key: str,
        attempt: int,
        *,
        error_type: str | None = None,
        error_message: str | None = None,
        delay_seconds: float | None = None,
    ) -> bool:
        """A running attempt's outcome is open: record why, and when to reconcile it."""
        return await self._arun(
            f"marking effect key {key!r} unknown",
            amark_unknown_txn,
            key,
            attempt,
            error_type=None if error_type is None else error_text(error_type),
            error_message=seal_text(
                self.serde, None if error_message is None else error_text(error_message)
            ),
            delay_seconds=delay_seconds,
        )

    async def arelease(self, key: str, attempt: int, *, owner: str | None = None) -> None:
        """Let go of a running attempt that will not act: the next call attempts at once.
        With `owner` (`owner_of(call_token)`), only if that call holds it."""
        await self._arun(f"releasing effect key {key!r}", arelease_txn, key, attempt, owner)

    async def areplayed(self, key: str) -> None:
        await self._arun(
            f"counting a replay of effect key {key!r}",
            _arows,
            QUERIES["effect_replayed"],
            {"key": key},
        )

    async def aallow_retry(self, key: str, attempt: int, *, resolved_by: str) -> bool:
        """The receiver never acted: the next call attempts again (if the row is as seen)."""
        params = {
            "key": key,
            "seen_attempt": attempt,
            "seen_statuses": [s.value for s in RESOLVABLE_STATUSES],
            "resolved_by": resolved_by,
        }
        return bool(
            await self._arun(
                f"allowing a retry of effect key {key!r}",
                _arows,
                QUERIES["effect_allow_retry"],
                params,
            )
        )

    async def aresolve(
        self,
        key: str,
        *,
        completed: Any = NOT_GIVEN,
        allow_retry: bool = False,
        failed: str | None = None,
        resolved_by: str = "operator",
        attempt: int | None = None,
    ) -> None:
        """Resolve an unknown outcome by hand, after checking the receiver by key.

        Pass exactly one of:

        - `completed=<result>`: the receiver acted; replays return this result (None is a
          result too);
        - `allow_retry=True`: it did not act; the next call attempts again;
        - `failed="<reason>"`: give up; replays raise `EffectFailedError` with the reason.

        Then resume the thread with `invoke(None, config)`. Pass `attempt` (the row's
        attempt when you checked the receiver, as `open_effects()` lists it) to have the
        resolution refused if another attempt started since: a screen left open must not
        settle an attempt nobody checked.

        Raises:
            EffectError: Not exactly one choice, no such key, nothing to resolve, or the
                row is at another attempt than `attempt`.
        """
        row = await self.aget(key)
        dead = row is not None and owner_is_dead(row.lease_owner)
        how = choose_resolution(
            key, row, completed, allow_retry, failed, owner_dead=dead, attempt=attempt
        )
        assert row is not None
        if how is Resolution.ALLOW_RETRY:
            done = await self.aallow_retry(key, row.attempt, resolved_by=resolved_by)
        elif how is Resolution.FAILED:
            assert failed is not None
            done = await self.afail(
                key,
                row.attempt,
                RESOLVED_AS_FAILED,
                failed,
                seen_statuses=RESOLVABLE_STATUSES,
                resolved_by=resolved_by,
            )
        else:
            event_type = row.extra.get("completion_event")
            thread_id = row.extra.get("thread_id")
            events = (
                [completion_event_of(event_type, key, row.effect_name, thread_id, completed)]
                if event_type
                else []
            )
            done = await self.acomplete(
                key,
                row.attempt,
                completed,
                seen_statuses=RESOLVABLE_STATUSES,
                resolved_by=resolved_by,
                events=events,
            )
        check_resolved(key, done)

    async def aopen_effects(
        self, thread_id: str | None = None, limit: int = 100
    ) -> builtins.list[dict[str, Any]]:
        """Effects running, unknown, deferred or waiting to retry, oldest first."""
        params = {"thread_id": thread_id, "limit": limit}
        rows = await self._arun("listing open effects", _arows, QUERIES["effects_open"], params)
        return [{**r, "error_message": open_text(self.serde, r["error_message"])} for r in rows]

    async def athread_effects(
        self, thread_id: str, limit: int = 1000
    ) -> builtins.list[dict[str, Any]]:
        """Every effect of a thread, in the order its steps ran them (for operators)."""
        params = {"thread_id": thread_id, "limit": limit}
        rows = await self._arun(
            "reading a thread's effects", _arows, QUERIES["effects_of_thread"], params
        )
        return [{**r, "error_message": open_text(self.serde, r["error_message"])} for r in rows]

    async def adetails(self, key: str) -> dict[str, Any] | None:
        """One effect's row as an operator sees it, its result loaded (`result`), or None."""
        rows = await self._arun(
            "reading an effect", _arows, QUERIES["effect_details"], {"key": key}
        )
        if not rows:
            return None
        row = dict(rows[0])
        stored = (row.pop("result_type"), row.pop("result"))
        row["result"] = None if stored[0] is None else self.serde.loads_typed(stored)
        row["error_message"] = open_text(self.serde, row["error_message"])
        return row

    async def atoken_ledger(self, thread_id: str) -> dict[str, int]:
        """Tokens spent by journaled model calls of a thread, and tokens saved by replays."""
        rows = await self._arun(
            "reading the token ledger", _arows, QUERIES["token_ledger"], {"thread_id": thread_id}
        )
        return {k: int(v) for k, v in rows[0].items()}

    async def asleep(self, seconds: float) -> None:
        """How the runner waits for a backoff or another worker's lease."""
        await asyncio.sleep(seconds)
