# WARNING: generated from _aoutbox.py by tools/async_to_sync.py. DO NOT EDIT.
# Edit the async source and run `python tools/async_to_sync.py`.
"""Outbox and inbox statements on a caller's connection: emit, backlog, replay, retention.

Generated from the async source; edit that file, not this one.

The `*_txn` forms run inside the caller's transaction, so an event commits or rolls back
with the caller's own writes (invariant I7), and a consumer's inbox row commits with the
work the message caused.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from psycopg import Connection

from langgraph_durable._sql import QUERIES
from langgraph_durable.checkpoint import event_params
from langgraph_durable.errors import InvalidInputError, WrongArgumentTypeError
from langgraph_durable.outbox._base import (
    MAX_ROWS,
    age_seconds,
    event_id_of,
    inbox_ids,
    row_limit,
)
from langgraph_durable.outbox._emit import checked_event

__all__ = [
    "backlog",
    "emit_txn",
    "events",
    "inbox_record_txn",
    "prune_inbox",
    "prune_published",
    "replay_dead",
]

PgConn = Connection[Any]


def emit_txn(
    conn: PgConn,
    event_type: str,
    payload: Any,
    *,
    key: str = "",
    event_id: str | None = None,
) -> str:
    """Store an outbox event in the caller's transaction; returns its event id.

    The event commits or rolls back with whatever else the transaction writes. Give an
    `event_id` to make a retried transaction store the event once.

    Args:
        conn: A connection in the transaction that makes the change the event announces.
        event_type: What happened, e.g. "order.shipped".
        payload: JSON-serializable data. It is stored as Postgres jsonb, and consumers
            receive it as jsonb normalizes it (README "Payloads"): keys in jsonb's order,
            a whole float written with an exponent (1e20) as an int, -0.0 as 0.0.
        key: Events of one key are published in order.
        event_id: A UUID for the event; a new one when not given.
    """
    event = checked_event(event_type, payload, key)
    params = event_params([event])
    if event_id is not None:
        params["e_ids"] = [event_id_of(event_id)]
    del params["e_task_ids"]
    conn.execute(QUERIES["outbox_insert"], params)
    return str(params["e_ids"][0])


def inbox_record_txn(conn: PgConn, consumer: str, message_id: str) -> bool:
    """Record that `consumer` acts on `message_id`, in the transaction of that work.

    Returns True when the message is new: do the work in the same transaction. False
    means it was recorded before (a redelivery): do nothing, commit, and acknowledge it.

    Raises:
        InvalidInputError: `consumer` or `message_id` is empty or not text Postgres
            stores (a NUL, a lone surrogate).
    """
    consumer, message_id = inbox_ids(consumer, message_id)
    cur = conn.execute(QUERIES["inbox_record"], {"consumer": consumer, "message_id": message_id})
    return cur.fetchone() is not None


def backlog(conn: PgConn) -> dict[str, Any]:
    """Pending and dead events, and the age in seconds of the oldest pending one."""
    cur = conn.execute(QUERIES["outbox_backlog"])
    row = cur.fetchone()
    names = [column.name for column in cur.description or ()]
    values = dict(row) if isinstance(row, dict) else dict(zip(names, row or (), strict=True))
    return {
        "pending": int(values["pending"]),
        "dead": int(values["dead"]),
        "oldest_pending_seconds": float(values["oldest_pending_seconds"]),
    }


def events(conn: PgConn, *, status: str | None = None, limit: int = 100) -> list[Any]:
    """Events newest first (all, or those with `status`: pending, published, dead).

    Each row holds seq, event_id, event_type, key, payload, thread_id, task_id, status,
    attempts, next_attempt_at, last_error, created_at and published_at; next_attempt_at
    is None for an event the relay may try at once (never tried, or replayed).

    Raises:
        InvalidInputError: `status` is none of those, or `limit` is not a whole number
            >= 1.
    """
    if status not in (None, "pending", "published", "dead"):
        raise InvalidInputError(f"status {status!r}: use pending, published or dead")
    params = {"status": status, "limit": row_limit(limit)}
    cur = conn.execute(QUERIES["outbox_events"], params)
    return list(cur.fetchall())


def replay_dead(conn: PgConn, event_ids: Sequence[str] | None = None) -> int:
    """Move dead events (all, or those listed) back to pending; returns how many moved.

    Raises:
        WrongArgumentTypeError: `event_ids` is one id, not a list of them (a string was
            read character by character, refused as its first character).
    """
    if isinstance(event_ids, (str, bytes, uuid.UUID)):
        raise WrongArgumentTypeError(
            f"event_ids={event_ids!r}: give a list of event ids, e.g. [{str(event_ids)!r}], "
            "or None for every dead event; nothing was moved."
        )
    ids = None if event_ids is None else [event_id_of(i) for i in event_ids]
    cur = conn.execute(QUERIES["outbox_replay_dead"], {"event_ids": ids})
    return len(cur.fetchall())


def prune_published(conn: PgConn, older_than: float, *, batch: int = 10_000) -> int:
    """Delete events published more than `older_than` seconds ago, `batch` rows per
    statement; returns how many.

    Raises:
        InvalidInputError: `batch` is not a whole number from 1 to 2**63 - 1 (with 0 it
            never returned: each statement deleted a full batch of 0 rows).
    """
    if isinstance(batch, bool) or not isinstance(batch, int) or not 1 <= batch <= MAX_ROWS:
        raise InvalidInputError(
            f"batch={batch!r}: give the rows per statement as a whole number >= 1."
        )
    params = {"older_than": age_seconds(older_than), "batch": batch}
    total = 0
    while True:
        cur = conn.execute(QUERIES["outbox_prune_published"], params)
        total += cur.rowcount
        if cur.rowcount < batch:
            return total


def prune_inbox(conn: PgConn, older_than: float) -> int:
    """Forget inbox rows older than `older_than` seconds (longer than any redelivery)."""
    cur = conn.execute(QUERIES["inbox_prune"], {"older_than": age_seconds(older_than)})
    return cur.rowcount
