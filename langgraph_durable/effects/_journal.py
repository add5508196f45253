# WARNING: generated from _ajournal.py by tools/async_to_sync.py. DO NOT EDIT.
# Edit the async source and run `python tools/async_to_sync.py`.
"""The effect journal on Postgres.

Generated from the async source; edit that file, not this one.

One row per idempotency key in `langgraph_durable_effects`, in the same database as the
checkpoints. Each write is one statement, conditional on the attempt and status the caller
saw, so only one worker ever owns an attempt, and each commits with synchronous_commit on
whatever the session says (I1). Results are stored with the saver's serializer.

Every write has a `*_txn(conn, ...)` form that runs inside the caller's transaction, so a
change of one's own (an outbox event, a run's status) commits atomically with it; the
methods of `EffectJournal` open their own connection and call those forms.
"""

from __future__ import annotations

import builtins
import dataclasses
import time
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, TypeVar

from langgraph.checkpoint.serde.base import SerializerProtocol
from psycopg import Connection, Cursor, pq
from psycopg.rows import DictRow, tuple_row
from typing_extensions import LiteralString

from langgraph_durable._db import (
    Conn,
    ConnectionSource,
    TextArray,
    Timeout,
    owner_is_dead,
    process_owner,
    register_source,
    retry_on_disconnect,
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
    "EffectJournal",
    "claim_txn",
    "complete_txn",
    "fail_txn",
    "mark_unknown_txn",
    "release_txn",
    "take_over_txn",
    "wait_retry_txn",
]

T = TypeVar("T")
PgConn = Connection[DictRow]


def _execute(conn: PgConn, cur: Cursor[Any], query: LiteralString, params: dict[str, Any]) -> None:
    """Run `query` on `cur` with its results in hand on return: its rows, its columns and
    its row count. On a connection in pipeline mode (a saver made with `pipe=`) those
    arrive at the next sync, so the statement runs in a nested pipeline block, whose end
    syncs."""
    if conn.pgconn.pipeline_status == pq.PipelineStatus.OFF:
        cur.execute(query, params)
    else:
        with conn.pipeline():
            cur.execute(query, params)


def _first_column(conn: PgConn, query: LiteralString, params: dict[str, Any]) -> list[Any]:
    """The first column of each row of a statement that returns rows (`RETURNING`, a final
    `SELECT`): the hot path needs no dict per row, nor the result's column descriptions
    (building them cost about 7% of an `@effect` call's CPU)."""
    cur = conn.cursor(row_factory=tuple_row)
    _execute(conn, cur, query, params)
    return [row[0] for row in cur.fetchall()]


def _row_count(conn: PgConn, query: LiteralString, params: dict[str, Any]) -> int:
    """How many rows a statement wrote (or its final `SELECT` returned): the hot path's
    statements answer with their row count rather than a returned row (which cost an
    `@effect` call about 15 us on the claim and 25 on the completion)."""
    cur = conn.cursor(row_factory=tuple_row)
    _execute(conn, cur, query, params)
    return cur.rowcount


def _rows(conn: PgConn, query: LiteralString, params: dict[str, Any]) -> list[dict[str, Any]]:
    cur = conn.cursor()
    _execute(conn, cur, query, params)
    return cur.fetchall() if cur.description else []


def claim_txn(
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
    return 1 if _row_count(conn, statement, params) else None


def take_over_txn(
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
    attempts = _first_column(conn, statement, params)
    return int(attempts[0]) if attempts else None


def complete_txn(
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
    return _row_count(conn, query, params) == 1


def fail_txn(
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
    return bool(_rows(conn, QUERIES["effect_fail"], params))


def wait_retry_txn(
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
    rows = _rows(conn, QUERIES["effect_wait_retry"], params)
    return rows[0]["next_attempt_at"] if rows else None


def mark_unknown_txn(
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
    return bool(_rows(conn, QUERIES["effect_mark_unknown"], params))


def release_txn(conn: PgConn, key: str, attempt: int, owner: str | None = None) -> None:
    """Control flow (an interrupt) left the call: the next call starts a fresh attempt.
    With `owner`, only if the attempt is that lease owner's."""
    params = {"key": key, "seen_attempt": attempt, "owner": owner}
    _rows(conn, QUERIES["effect_release"], params)


class EffectJournal:
    """The journal of effects, in the database of a saver (or a pool, or a connection).

    Args:
        conn: A psycopg `ConnectionPool` or `Connection` on a database where
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
        conn: Conn | ConnectionSource,
        *,
        serde: SerializerProtocol | None = None,
        lock_timeout: Timeout = None,
        statement_timeout: Timeout = None,
    ) -> None:
        if not isinstance(conn, ConnectionSource):
            conn = ConnectionSource(
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

    @retry_on_disconnect
    def _run(self, doing: str, operation: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """One `*_txn` operation on a connection of its own; `doing` names it in errors."""
        with self._source.connection(doing) as conn:
            return operation(conn, *args, **kwargs)

    def owner_of(self, call_token: str) -> str:
        """The lease owner of one call: this process, and the call (`owner#token`), so a
        call whose claim committed but whose reply was lost knows the attempt is its own."""
        return f"{self.owner}#{call_token}"

    def claim(
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
        return self._run(
            f"claiming effect key {key!r}",
            claim_txn,
            key,
            name,
            seal_text(self.serde, input_hash) or input_hash,
            owner=self.owner_of(call_token),
            lease_seconds=lease_seconds,
            where=where,
            completion_event=completion_event,
            default_key=default_key,
        )

    def get(self, key: str) -> JournalRow | None:
        rows = self._run(f"reading effect key {key!r}", _rows, QUERIES["effect_get"], {"key": key})
        if not rows:
            return None
        row = row_of(rows[0])
        return dataclasses.replace(
            row,
            input_hash=open_text(self.serde, row.input_hash) or row.input_hash,
            error_message=open_text(self.serde, row.error_message),
        )

    def now(self) -> datetime:
        """The database's clock (`clock_timestamp()`), by which the journal times its rows
        and the run registry its runs; a worker's own clock may be ahead or behind."""
        (now,) = self._run("reading the database clock", _first_column, QUERIES["effect_clock"], {})
        assert isinstance(now, datetime)
        return now

    def take_over(
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
        return self._run(
            f"taking over effect key {key!r}",
            take_over_txn,
            key,
            seen_attempt,
            seen_status,
            owner=self.owner_of(call_token),
            lease_seconds=lease_seconds,
            where=where,
        )

    def lease_held(self, where: TaskContext) -> bool:
        """Whether the thread lease the call runs under (`where.fence_token`) is still
        held: asked when a fenced claim or takeover changed nothing."""
        if where.fence_token is None:
            return True
        params = {"thread_id": where.thread_id, "fence_token": where.fence_token}
        found = self._run(
            f"checking the lease of thread {where.thread_id!r}",
            _first_column,
            QUERIES["thread_lease_held"],
            params,
        )
        return bool(found and found[0])

    def dump_result(self, key: str, result: Any) -> tuple[str, bytes]:
        """Serialize a result for the journal, or raise `EffectResultNotStoredError`."""
        return dump_result(self.serde, key, result)

    def load_result(self, row: JournalRow) -> Any:
        return load_result(self.serde, row)

    def complete(
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
        return self._run(
            f"storing the result of effect key {key!r}",
            complete_txn,
            key,
            attempt,
            encoded,
            usage=usage,
            seen_statuses=seen_statuses,
            resolved_by=resolved_by,
            events=events,
        )

    def fail(
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
        return self._run(
            f"storing the failure of effect key {key!r}",
            fail_txn,
            key,
            attempt,
            error_text(error_type),
            seal_text(self.serde, error_text(error_message)),
            seen_statuses=seen_statuses,
            resolved_by=resolved_by,
        )

    def wait_retry(
        self,
        key: str,
        attempt: int,
        *,
        status: EffectStatus,
        delay_seconds: float,
        error: BaseException,
    ) -> Any:
        """Record a pending retry (`RETRY_WAIT`) or a deferral (`DEFERRED`); its time."""
        return self._run(
            f"scheduling a retry of effect key {key!r}",
            wait_retry_txn,
            key,
            attempt,
            status=status,
            delay_seconds=delay_seconds,
            error=error,
            error_message=seal_text(self.serde, error_message_of(error)),
        )

    def extend_lease(self, key: str, attempt: int, lease_seconds: float) -> bool:
        """Move a running attempt's lease on; False once the attempt is no longer running."""
        params = {"key": key, "seen_attempt": attempt, "lease_seconds": lease_seconds}
        return bool(
            self._run(
                f"extending the lease of effect key {key!r}",
                _rows,
                QUERIES["effect_extend_lease"],
                params,
            )
        )

    def mark_unknown(
        self,
        key: str,
        attempt: int,
        *,
        error_type: str | None = None,
        error_message: str | None = None,
        delay_seconds: float | None = None,
    ) -> bool:
        """A running attempt's outcome is open: record why, and when to reconcile it."""
        return self._run(
            f"marking effect key {key!r} unknown",
            mark_unknown_txn,
            key,
            attempt,
            error_type=None if error_type is None else error_text(error_type),
            error_message=seal_text(
                self.serde, None if error_message is None else error_text(error_message)
            ),
            delay_seconds=delay_seconds,
        )

    def release(self, key: str, attempt: int, *, owner: str | None = None) -> None:
        """Let go of a running attempt that will not act: the next call attempts at once.
        With `owner` (`owner_of(call_token)`), only if that call holds it."""
        self._run(f"releasing effect key {key!r}", release_txn, key, attempt, owner)

    def replayed(self, key: str) -> None:
        self._run(
            f"counting a replay of effect key {key!r}",
            _rows,
            QUERIES["effect_replayed"],
            {"key": key},
        )

    def allow_retry(self, key: str, attempt: int, *, resolved_by: str) -> bool:
        """The receiver never acted: the next call attempts again (if the row is as seen)."""
        params = {
            "key": key,
            "seen_attempt": attempt,
            "seen_statuses": [s.value for s in RESOLVABLE_STATUSES],
            "resolved_by": resolved_by,
        }
        return bool(
            self._run(
                f"allowing a retry of effect key {key!r}",
                _rows,
                QUERIES["effect_allow_retry"],
                params,
            )
        )

    def resolve(
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
        row = self.get(key)
        dead = row is not None and owner_is_dead(row.lease_owner)
        how = choose_resolution(
            key, row, completed, allow_retry, failed, owner_dead=dead, attempt=attempt
        )
        assert row is not None
        if how is Resolution.ALLOW_RETRY:
            done = self.allow_retry(key, row.attempt, resolved_by=resolved_by)
        elif how is Resolution.FAILED:
            assert failed is not None
            done = self.fail(
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
            done = self.complete(
                key,
                row.attempt,
                completed,
                seen_statuses=RESOLVABLE_STATUSES,
                resolved_by=resolved_by,
                events=events,
            )
        check_resolved(key, done)

    def open_effects(
        self, thread_id: str | None = None, limit: int = 100
    ) -> builtins.list[dict[str, Any]]:
        """Effects running, unknown, deferred or waiting to retry, oldest first."""
        params = {"thread_id": thread_id, "limit": limit}
        rows = self._run("listing open effects", _rows, QUERIES["effects_open"], params)
        return [{**r, "error_message": open_text(self.serde, r["error_message"])} for r in rows]

    def thread_effects(self, thread_id: str, limit: int = 1000) -> builtins.list[dict[str, Any]]:
        """Every effect of a thread, in the order its steps ran them (for operators)."""
        params = {"thread_id": thread_id, "limit": limit}
        rows = self._run("reading a thread's effects", _rows, QUERIES["effects_of_thread"], params)
        return [{**r, "error_message": open_text(self.serde, r["error_message"])} for r in rows]

    def details(self, key: str) -> dict[str, Any] | None:
        """One effect's row as an operator sees it, its result loaded (`result`), or None."""
        rows = self._run("reading an effect", _rows, QUERIES["effect_details"], {"key": key})
        if not rows:
            return None
        row = dict(rows[0])
        stored = (row.pop("result_type"), row.pop("result"))
        row["result"] = None if stored[0] is None else self.serde.loads_typed(stored)
        row["error_message"] = open_text(self.serde, row["error_message"])
        return row

    def token_ledger(self, thread_id: str) -> dict[str, int]:
        """Tokens spent by journaled model calls of a thread, and tokens saved by replays."""
        rows = self._run(
            "reading the token ledger", _rows, QUERIES["token_ledger"], {"thread_id": thread_id}
        )
        return {k: int(v) for k, v in rows[0].items()}

    def sleep(self, seconds: float) -> None:
        """How the runner waits for a backoff or another worker's lease."""
        time.sleep(seconds)
