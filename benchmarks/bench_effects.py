"""Cost of an `@effect` call against the commit floor, timed side by side.

An `@effect` call on a new key is two journal statements, each its own synchronous commit:
the claim (INSERT) before the call and the result (UPDATE) after it. Its floor is two
single-row INSERT + commit statements on the same pool, each with its own pool checkout as
the journal does; the raw floor is one of them. The same two journal statements run with
precomputed parameters ("statements") are the floor for any `@effect` on this journal.
The effect's body does nothing, so the difference is the journal's own cost. Samples of
the four are interleaved.
"""

from __future__ import annotations

import itertools
import random
import uuid
from collections.abc import Callable
from typing import Any

from bench_common import Stats, ours, timed_ms
from psycopg import Connection
from psycopg.rows import DictRow
from psycopg_pool import ConnectionPool

from langgraph_durable import EffectJournal, effect
from langgraph_durable._db import TextArray
from langgraph_durable._sql import claim_effect, complete_effect
from langgraph_durable.effects._rows import claim_params

FLOOR_TABLE = """
CREATE TABLE IF NOT EXISTS bench_floor (
    key TEXT PRIMARY KEY,
    payload BYTEA NOT NULL,
    created_at TIMESTAMPTZ NOT NULL DEFAULT now()
)
"""
FLOOR_INSERT = "INSERT INTO bench_floor (key, payload) VALUES (%s, %s)"

# The journal's two statements for a call of `noop` below, with its parameters computed
# once: what the journal costs without any Python around it (the floor for `@effect`).
# The journal's own parameters (less the key, given per call), so they never drift from
# the claim statement.
CLAIM_PARAMS: dict[str, Any] = {
    k: v
    for k, v in claim_params("", "noop", "0" * 64, "bench#call", 300.0, None).items()
    if k != "key"
}
COMPLETE_PARAMS: dict[str, Any] = {
    "seen_attempt": 1,
    "seen_statuses": TextArray(["running"]),
    "result_type": "msgpack",
    "result": b"\x81\xa1n\x01",
    "usage": None,
    "resolved_by": None,
}


def effects(dsn: str, reps: int, warmup: int) -> dict[str, Stats]:
    """ms per call: "effect", "statements" (its journal statements alone), "two_commits"
    (its floor) and "one_commit" (the raw floor)."""
    with ours(dsn, 4) as saver:
        pool: ConnectionPool[Connection[DictRow]] = saver.conn  # type: ignore[assignment]
        with pool.connection() as conn:
            conn.execute(FLOOR_TABLE)
        journal = EffectJournal(pool)
        run = uuid.uuid4().hex[:8]
        payload = b"x" * 64

        @effect(key=lambda n: f"bench:{run}:{n}", journal=journal)
        def noop(n: int) -> dict[str, int]:
            return {"n": n}

        counter = itertools.count()

        def insert() -> None:
            with pool.connection() as conn:
                conn.execute(FLOOR_INSERT, (f"{run}:{next(counter)}", payload))

        def two_commits() -> None:
            insert()
            insert()

        def call() -> None:
            noop(next(counter))

        claim, complete = claim_effect(fenced=False), complete_effect(events=False)

        def statements() -> None:
            key = f"bench:{run}:raw:{next(counter)}"
            with pool.connection() as conn:  # no rows back: the journal reads row counts
                conn.execute(claim, {**CLAIM_PARAMS, "key": key})
            with pool.connection() as conn:
                conn.execute(complete, {**COMPLETE_PARAMS, "key": key})

        calls: dict[str, Callable[[], Any]] = {
            "effect": call,
            "statements": statements,
            "two_commits": two_commits,
            "one_commit": insert,
        }
        for fn in calls.values():
            for _ in range(warmup):
                fn()
        samples: dict[str, list[float]] = {name: [] for name in calls}
        order = list(calls)
        shuffler = random.Random(5)
        for _ in range(reps):
            shuffler.shuffle(order)
            for name in order:
                samples[name].append(timed_ms(calls[name]))
    return {name: Stats.of(values) for name, values in samples.items()}
