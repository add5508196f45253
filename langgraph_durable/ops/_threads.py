# WARNING: generated from _athreads.py by tools/async_to_sync.py. DO NOT EDIT.
# Edit the async source and run `python tools/async_to_sync.py`.
"""Reading a thread's history: its checkpoints, the effects its steps ran, tokens paid.

Generated from the async source; edit that file, not this one.

Operators read threads without the graph that wrote them: everything here comes from the
saver's tables and the effect journal (decoded with the saver's serializer), so the CLI and
the web console can show any thread of the database.
"""

from __future__ import annotations

import builtins
from typing import Any

from langgraph_durable._db import source_of
from langgraph_durable._ids import thread_id_of
from langgraph_durable._sql import QUERIES
from langgraph_durable.checkpoint import DurablePostgresSaver
from langgraph_durable.effects import EffectJournal, journal_of
from langgraph_durable.errors import ThreadNotFoundError
from langgraph_durable.ops._history import (
    ThreadHistory,
    ThreadSummary,
    checked_limit,
    checked_saver,
    diff_values,
    latest_steps,
    plain,
)

__all__ = ["list_threads", "thread_diff", "thread_history"]


def list_threads(
    saver: DurablePostgresSaver, *, prefix: str | None = None, limit: int = 100
) -> builtins.list[ThreadSummary]:
    """Threads by their latest checkpoint, most recently active first."""
    source = source_of(checked_saver(saver, DurablePostgresSaver))
    params = {"prefix": prefix, "limit": checked_limit(limit)}
    with source.connection("listing threads") as conn:
        cur = conn.execute(QUERIES["threads_list"], params)
        rows = cur.fetchall()
    found = [
        ThreadSummary(
            thread_id=r["thread_id"],
            checkpoints=int(r["checkpoints"]),
            latest_checkpoint_id=r["checkpoint_id"],
            updated_at=r["updated_at"],
            step=r["step"],
            source=r["source"],
        )
        for r in rows
    ]
    return sorted(found, key=lambda t: t.latest_checkpoint_id, reverse=True)


def thread_history(
    saver: DurablePostgresSaver, thread_id: str, *, limit: int = 100
) -> ThreadHistory:
    """A thread's latest `limit` steps (oldest first), its effects and its token ledger.

    Raises:
        ThreadNotFoundError: The thread has no checkpoints in this database.
    """
    thread_id = thread_id_of(thread_id)
    config: Any = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
    checked = checked_saver(saver, DurablePostgresSaver)
    # One checkpoint more than shown: what the oldest step shown is compared with.
    tuples = [t for t in checked.list(config, limit=checked_limit(limit) + 1)]
    if not tuples:
        raise ThreadNotFoundError(
            f"Thread {thread_id!r} has no checkpoints in this database; check the thread id "
            "(`threads list` shows the threads there are)."
        )
    journal = journal_of(checked)
    assert isinstance(journal, EffectJournal)
    return ThreadHistory(
        thread_id=thread_id,
        steps=latest_steps(tuples, limit),
        effects=[
            {k: plain(v) for k, v in row.items()} for row in journal.thread_effects(thread_id)
        ],
        tokens=journal.token_ledger(thread_id),
    )


def thread_diff(
    saver: DurablePostgresSaver,
    thread_id: str,
    *,
    before: str | None = None,
    after: str | None = None,
) -> dict[str, Any]:
    """How a thread's state changed from checkpoint `before` to `after` (default: the
    latest checkpoint, and the one before it).

    Raises:
        ThreadNotFoundError: The thread or a named checkpoint is not in this database.
    """
    thread_id = thread_id_of(thread_id)
    checked = checked_saver(saver, DurablePostgresSaver)

    def load(checkpoint_id: str | None) -> Any:
        configurable = {"thread_id": thread_id, "checkpoint_ns": ""}
        if checkpoint_id is not None:
            configurable["checkpoint_id"] = thread_id_of(checkpoint_id, "checkpoint_id")
        found = checked.get_tuple({"configurable": configurable})
        if found is None:
            what = f"checkpoint {checkpoint_id!r} of thread" if checkpoint_id else "thread"
            raise ThreadNotFoundError(
                f"No {what} {thread_id!r} in this database; `threads history` lists a "
                "thread's checkpoints."
            )
        return found

    newer = load(after)
    if before is None and newer.parent_config is None:
        older_values: dict[str, Any] = {}
        older_id = None
    else:
        older = load(
            before if before is not None else newer.parent_config["configurable"]["checkpoint_id"]
        )
        older_values, older_id = older.checkpoint["channel_values"], older.checkpoint["id"]
    return {
        "thread_id": thread_id,
        "before": older_id,
        "after": newer.checkpoint["id"],
        **diff_values(older_values, newer.checkpoint["channel_values"]),
    }
