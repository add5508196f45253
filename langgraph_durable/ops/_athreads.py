"""Reading a thread's history: its checkpoints, the effects its steps ran, tokens paid.

Async source: the sync twin is generated from this file.

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
from langgraph_durable.checkpoint import AsyncDurablePostgresSaver
from langgraph_durable.effects import AsyncEffectJournal, journal_of
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

__all__ = ["alist_threads", "athread_diff", "athread_history"]


async def alist_threads(
    saver: AsyncDurablePostgresSaver, *, prefix: str | None = None, limit: int = 100
) -> builtins.list[ThreadSummary]:
    """Threads by their latest checkpoint, most recently active first."""
    source = source_of(checked_saver(saver, AsyncDurablePostgresSaver))
    params = {"prefix": prefix, "limit": checked_limit(limit)}
    async with source.connection("listing threads") as conn:
        cur = await conn.execute(QUERIES["threads_list"], params)
        rows = await cur.fetchall()
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


async def athread_history(
    saver: AsyncDurablePostgresSaver, thread_id: str, *, limit: int = 100
) -> ThreadHistory:
    """A thread's latest `limit` steps (oldest first), its effects and its token ledger.

    Raises:
        ThreadNotFoundError: The thread has no checkpoints in this database.
    """
    thread_id = thread_id_of(thread_id)
    config: Any = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
    checked = checked_saver(saver, AsyncDurablePostgresSaver)
    # One checkpoint more than shown: what the oldest step shown is compared with.
    tuples = [t async for t in checked.alist(config, limit=checked_limit(limit) + 1)]
    if not tuples:
        raise ThreadNotFoundError(
            f"Thread {thread_id!r} has no checkpoints in this database; check the thread id "
            "(`threads list` shows the threads there are)."
        )
    journal = journal_of(checked)
    assert isinstance(journal, AsyncEffectJournal)
    return ThreadHistory(
        thread_id=thread_id,
        steps=latest_steps(tuples, limit),
        effects=[
            {k: plain(v) for k, v in row.items()}
            for row in await journal.athread_effects(thread_id)
        ],
        tokens=await journal.atoken_ledger(thread_id),
    )


async def athread_diff(
    saver: AsyncDurablePostgresSaver,
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
    checked = checked_saver(saver, AsyncDurablePostgresSaver)

    async def load(checkpoint_id: str | None) -> Any:
        configurable = {"thread_id": thread_id, "checkpoint_ns": ""}
        if checkpoint_id is not None:
            configurable["checkpoint_id"] = thread_id_of(checkpoint_id, "checkpoint_id")
        found = await checked.aget_tuple({"configurable": configurable})
        if found is None:
            what = f"checkpoint {checkpoint_id!r} of thread" if checkpoint_id else "thread"
            raise ThreadNotFoundError(
                f"No {what} {thread_id!r} in this database; `threads history` lists a "
                "thread's checkpoints."
            )
        return found

    newer = await load(after)
    if before is None and newer.parent_config is None:
        older_values: dict[str, Any] = {}
        older_id = None
    else:
        older = await load(
            before if before is not None else newer.parent_config["configurable"]["checkpoint_id"]
        )
        older_values, older_id = older.checkpoint["channel_values"], older.checkpoint["id"]
    return {
        "thread_id": thread_id,
        "before": older_id,
        "after": newer.checkpoint["id"],
        **diff_values(older_values, newer.checkpoint["channel_values"]),
    }
