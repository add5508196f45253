"""The effect journal on Postgres (async source; `_journal.py` is generated from it).

One row per idempotency key in `langgraph_durable_effects`, in the same database as the
checkpoints. Each method is one statement; state changes are conditional on the attempt
and status the caller saw, so only one worker ever owns an attempt. Results are stored
with the saver's serializer, so an encrypting serializer encrypts them too.
"""

from __future__ import annotations

import asyncio
import builtins
import json
import os
import socket
from collections.abc import Sequence
from typing import Any

from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from psycopg.rows import tuple_row
from typing_extensions import LiteralString

from langgraph_durable._sql import QUERIES
from langgraph_durable.checkpoint._aconnection import (
    AsyncConn,
    AsyncConnectionSource,
    retry_on_disconnect,
)
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
from langgraph_durable.errors import EffectResultNotStoredError

__all__ = ["AsyncEffectJournal", "process_owner"]


def _stat_fields(pid: str) -> list[str] | None:
    """The fields of /proc/<pid>/stat after the command name (Linux), or None."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as stat:
            return stat.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def _process_start() -> str:
    """This process's start time in clock ticks (Linux), so a reused pid is not taken for us."""
    fields = _stat_fields(str(os.getpid()))
    return fields[19] if fields and len(fields) > 19 else "0"


def process_owner() -> str:
    """Who holds a lease: host, pid and process start, checked by `owner_is_dead`."""
    return f"{socket.gethostname()}:{os.getpid()}:{_process_start()}"


def owner_is_dead(owner: str | None) -> bool:
    """Whether a lease owner on this host is a process that no longer runs.

    A pid that is gone, reused by a later process (another start time), or a zombie (dead,
    not yet reaped by its parent) counts as dead. Owners on other hosts cannot be checked;
    their leases simply run out.
    """
    if not owner:
        return False
    host, _, rest = owner.partition(":")
    pid_text, _, started = rest.partition(":")
    if host != socket.gethostname() or not pid_text.isdigit():
        return False
    fields = _stat_fields(pid_text)
    if fields is not None and len(fields) > 19:
        # fields[0] is the state: Z (zombie) and X (dead) no longer run any code.
        return fields[0] in ("Z", "X") or fields[19] != started
    try:
        os.kill(int(pid_text), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return started != "0"


def _row(found: dict[str, Any]) -> JournalRow:
    return JournalRow(
        key=found["key"],
        effect_name=found["effect_name"],
        input_hash=found["input_hash"],
        status=EffectStatus(found["status"]),
        attempt=found["attempt"],
        lease_owner=found["lease_owner"],
        lease_expires_at=found["lease_expires_at"],
        next_attempt_at=found["next_attempt_at"],
        result_type=found["result_type"],
        result=found["result"],
        error_type=found["error_type"],
        error_message=found["error_message"],
        db_now=found["db_now"],
        extra={k: found[k] for k in ("usage", "replays", "thread_id", "node", "step")},
    )


class AsyncEffectJournal:
    """The journal of effects, in the database of an async saver or pool.

    Args:
        conn: A psycopg `AsyncConnectionPool` or `AsyncConnection` on a database where
            `setup()` has run.
        serde: How results are stored; by default the JSON-plus serializer LangGraph uses.
    """

    def __init__(self, conn: AsyncConn, *, serde: SerializerProtocol | None = None) -> None:
        self._source = AsyncConnectionSource(conn)
        self.serde = serde or JsonPlusSerializer()
        self.owner = process_owner()

    @classmethod
    def _from_source(
        cls, source: AsyncConnectionSource, serde: SerializerProtocol
    ) -> AsyncEffectJournal:
        journal = cls.__new__(cls)
        journal._source = source
        journal.serde = serde
        journal.owner = process_owner()
        return journal

    @retry_on_disconnect
    async def _fetch(
        self, query: LiteralString, params: dict[str, Any]
    ) -> builtins.list[dict[str, Any]]:
        async with self._source.connection() as conn:
            cur = await conn.execute(query, params)
            return await cur.fetchall() if cur.description else []

    @retry_on_disconnect
    async def _fetch_first_column(
        self, query: LiteralString, params: dict[str, Any]
    ) -> builtins.list[Any]:
        """The first column of each row: for the `RETURNING attempt` statements of the hot
        path (claim, take over, complete), which need no dict per row."""
        async with self._source.connection() as conn:
            cur = conn.cursor(row_factory=tuple_row)
            await cur.execute(query, params)
            return [row[0] for row in await cur.fetchall()] if cur.description else []

    async def aclaim(
        self, key: str, name: str, input_hash: str, lease_seconds: float, where: TaskContext | None
    ) -> int | None:
        """Insert the row for a first attempt; the attempt number, or None if the key exists."""
        attempts = await self._fetch_first_column(
            QUERIES["effect_claim"],
            {
                "key": key,
                "effect_name": name,
                "input_hash": input_hash,
                "owner": self.owner,
                "lease_seconds": lease_seconds,
                "thread_id": where.thread_id if where else None,
                "checkpoint_ns": where.namespace if where else None,
                "node": where.node if where else None,
                "step": where.step if where else None,
            },
        )
        return int(attempts[0]) if attempts else None

    async def aget(self, key: str) -> JournalRow | None:
        rows = await self._fetch(QUERIES["effect_get"], {"key": key})
        return _row(rows[0]) if rows else None

    async def atake_over(
        self, key: str, seen_attempt: int, seen_status: EffectStatus, lease_seconds: float
    ) -> int | None:
        """Start the next attempt if the row is still as seen; its number, or None."""
        attempts = await self._fetch_first_column(
            QUERIES["effect_take_over"],
            {
                "key": key,
                "seen_attempt": seen_attempt,
                "seen_status": seen_status.value,
                "owner": self.owner,
                "lease_seconds": lease_seconds,
            },
        )
        return int(attempts[0]) if attempts else None

    def dump_result(self, key: str, result: Any) -> tuple[str, bytes]:
        """Serialize a result for the journal, or raise `EffectResultNotStoredError`."""
        try:
            return self.serde.dumps_typed(result)
        except Exception as exc:
            raise EffectResultNotStoredError(
                f"The result of the effect under key {key!r} (a {type(result).__name__}) "
                f"cannot be serialized ({exc}), so it was not journaled. Return plain data "
                "(str, numbers, dicts, lists, pydantic models), or convert the result inside "
                "the effect.",
                key=key,
            ) from exc

    async def acomplete(
        self,
        key: str,
        attempt: int,
        result: Any,
        *,
        usage: dict[str, Any] | None = None,
        seen_statuses: Sequence[EffectStatus] = (EffectStatus.RUNNING,),
        resolved_by: str | None = None,
    ) -> bool:
        """Store the result; False if the attempt was taken over meanwhile.

        Raises:
            EffectResultNotStoredError: The result cannot be serialized; nothing was written.
        """
        type_, blob = self.dump_result(key, result)
        rows = await self._fetch_first_column(
            QUERIES["effect_complete"],
            {
                "key": key,
                "seen_attempt": attempt,
                "seen_statuses": [s.value for s in seen_statuses],
                "result_type": type_,
                "result": blob,
                "usage": None if usage is None else _json_text(usage),
                "resolved_by": resolved_by,
            },
        )
        return bool(rows)

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
        rows = await self._fetch(
            QUERIES["effect_fail"],
            {
                "key": key,
                "seen_attempt": attempt,
                "seen_statuses": [s.value for s in seen_statuses],
                "error_type": error_type,
                "error_message": error_message,
                "resolved_by": resolved_by,
            },
        )
        return bool(rows)

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
        rows = await self._fetch(
            QUERIES["effect_wait_retry"],
            {
                "key": key,
                "seen_attempt": attempt,
                "status": status.value,
                "delay_seconds": delay_seconds,
                "error_type": type(error).__name__,
                "error_message": str(error)[:2000],
            },
        )
        return rows[0]["next_attempt_at"] if rows else None

    async def aextend_lease(self, key: str, attempt: int, lease_seconds: float) -> None:
        await self._fetch(
            QUERIES["effect_extend_lease"],
            {"key": key, "seen_attempt": attempt, "lease_seconds": lease_seconds},
        )

    async def amark_unknown(
        self,
        key: str,
        attempt: int,
        *,
        error_type: str | None = None,
        error_message: str | None = None,
        delay_seconds: float | None = None,
    ) -> None:
        """A running attempt's outcome is open: record why, and when to reconcile it."""
        await self._fetch(
            QUERIES["effect_mark_unknown"],
            {
                "key": key,
                "seen_attempt": attempt,
                "error_type": error_type,
                "error_message": None if error_message is None else error_message[:2000],
                "delay_seconds": delay_seconds,
            },
        )

    async def arelease(self, key: str, attempt: int) -> None:
        await self._fetch(QUERIES["effect_release"], {"key": key, "seen_attempt": attempt})

    async def areplayed(self, key: str) -> None:
        await self._fetch(QUERIES["effect_replayed"], {"key": key})

    async def aallow_retry(self, key: str, *, resolved_by: str) -> bool:
        rows = await self._fetch(
            QUERIES["effect_allow_retry"],
            {
                "key": key,
                "seen_statuses": [s.value for s in RESOLVABLE_STATUSES],
                "resolved_by": resolved_by,
            },
        )
        return bool(rows)

    async def aresolve(
        self,
        key: str,
        *,
        completed: Any = NOT_GIVEN,
        allow_retry: bool = False,
        failed: str | None = None,
        resolved_by: str = "operator",
    ) -> None:
        """Resolve an unknown outcome by hand, after checking the receiver by key.

        Pass exactly one of:

        - `completed=<result>`: the receiver acted; replays return this result (None is a
          result too);
        - `allow_retry=True`: it did not act; the next call attempts again;
        - `failed="<reason>"`: give up; replays raise `EffectFailedError` with the reason.

        Then resume the thread with `invoke(None, config)`.

        Raises:
            EffectError: Not exactly one choice, no such key, or nothing to resolve.
        """
        row = await self.aget(key)
        how = choose_resolution(key, row, completed, allow_retry, failed)
        assert row is not None
        if how is Resolution.ALLOW_RETRY:
            done = await self.aallow_retry(key, resolved_by=resolved_by)
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
            done = await self.acomplete(
                key,
                row.attempt,
                completed,
                seen_statuses=RESOLVABLE_STATUSES,
                resolved_by=resolved_by,
            )
        check_resolved(key, done)

    async def aopen_effects(
        self, thread_id: str | None = None, limit: int = 100
    ) -> builtins.list[dict[str, Any]]:
        """Effects running, unknown, deferred or waiting to retry, oldest first."""
        return await self._fetch(QUERIES["effects_open"], {"thread_id": thread_id, "limit": limit})

    async def atoken_ledger(self, thread_id: str) -> dict[str, int]:
        """Tokens spent by journaled model calls of a thread, and tokens saved by replays."""
        rows = await self._fetch(QUERIES["token_ledger"], {"thread_id": thread_id})
        return {k: int(v) for k, v in rows[0].items()}

    async def asleep(self, seconds: float) -> None:
        """How the runner waits for a backoff or another worker's lease."""
        await asyncio.sleep(seconds)

    def load_result(self, row: JournalRow) -> Any:
        assert row.result_type is not None
        assert row.result is not None
        return self.serde.loads_typed((row.result_type, row.result))


def _json_text(value: dict[str, Any]) -> str:
    return json.dumps(value, default=str)
