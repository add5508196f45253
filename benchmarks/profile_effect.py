"""Where the time of an `@effect` call goes, against the two-commit floor.

    python benchmarks/profile_effect.py [--dsn DSN] [--calls 5000] [--chunks 10]

Four ways to do an effect's two commits, each on a new key, taking turns in `--chunks`
chunks on one pool of one connection (so one backend serves them all):

- the `@effect` call (a no-op body, a business key);
- the journal's `claim` and `complete`, called directly (no runner, no key function, no
  input hash);
- the journal's two statements with their parameters computed once (`bench_effects.py`:
  the floor for any `@effect` on this journal);
- two single-row INSERT + commit statements (the floor the issue 16 target is set against);
- the `@effect` call on an in-memory journal (the runner's Python, no database), alone and
  right after the journal's two statements: what the same Python costs between round trips
  against in a loop of its own (docs/design.md, "Python on the hot path is weighed where
  it runs").

For each: wall time, this process's CPU (`time.process_time`) and the server's CPU (every
local `postgres` process, from `/proc`; 0 for a server on another machine) per call, and
what is left (waiting: the commit's WAL flush, the wake-ups of the round trips). The
differences between neighbouring lines say what each layer costs: the runner and the
call's preparation, the journal's Python, and the statements over two plain inserts.
"""

from __future__ import annotations

import argparse
import itertools
import uuid
from collections.abc import Callable
from typing import Any

from bench_common import Cost, costs_in_turns, ours, postgres_cpu_seconds, scratch_database
from bench_effects import CLAIM_PARAMS, COMPLETE_PARAMS, FLOOR_INSERT, FLOOR_TABLE
from psycopg import Connection
from psycopg.rows import DictRow
from psycopg_pool import ConnectionPool

from langgraph_durable import EffectJournal, effect
from langgraph_durable._sql import claim_effect, complete_effect
from langgraph_durable.effects._memory import MemoryEffectJournal
from langgraph_durable.embedded import resolve_dsn

LABELS = {
    "effect": "@effect call",
    "journal": "journal.claim + journal.complete",
    "statements": "the journal's two statements, parameters computed once",
    "two_commits": "two single-row INSERT + commit (the floor)",
    "in_memory": "@effect call on an in-memory journal",
    "journal_then_in_memory": "journal.claim + journal.complete, then that in-memory call",
}


def calls_of(pool: ConnectionPool[Connection[DictRow]]) -> dict[str, Callable[[], Any]]:
    """The four ways, each doing one effect's two commits on a new key per call."""
    with pool.connection() as conn:
        conn.execute(FLOOR_TABLE)
    journal = EffectJournal(pool)
    run = uuid.uuid4().hex[:8]
    counter = itertools.count()

    @effect(key=lambda n: f"profile:{run}:{n}", journal=journal)
    def noop(n: int) -> dict[str, int]:
        return {"n": n}

    @effect(key=lambda n: f"profile:{run}:{n}", journal=MemoryEffectJournal(), name="noop")
    def in_memory(n: int) -> dict[str, int]:
        return {"n": n}

    def journal_calls() -> None:
        key = f"profile:{run}:journal:{next(counter)}"
        attempt = journal.claim(key, "noop", "0" * 64, 300.0, None, "call")
        assert attempt is not None
        journal.complete(key, attempt, {"n": 1})

    claim, complete = claim_effect(fenced=False), complete_effect(events=False)

    def statements() -> None:
        key = f"profile:{run}:raw:{next(counter)}"
        with pool.connection() as conn:  # no rows back: the journal reads row counts
            conn.execute(claim, {**CLAIM_PARAMS, "key": key})
        with pool.connection() as conn:
            conn.execute(complete, {**COMPLETE_PARAMS, "key": key})

    def two_commits() -> None:
        for _ in range(2):
            with pool.connection() as conn:
                conn.execute(FLOOR_INSERT, (f"{run}:{next(counter)}", b"x" * 64))

    def journal_then_in_memory() -> None:
        journal_calls()
        in_memory(next(counter))

    return {
        "effect": lambda: noop(next(counter)),
        "journal": journal_calls,
        "statements": statements,
        "two_commits": two_commits,
        "in_memory": lambda: in_memory(next(counter)),
        "journal_then_in_memory": journal_then_in_memory,
    }


def measure(calls: dict[str, Callable[[], Any]], total: int, chunks: int) -> dict[str, Cost]:
    """`total` calls of each way, taking turns in `chunks` chunks, after a warm-up."""
    for fn in calls.values():
        for _ in range(50):
            fn()
    return costs_in_turns(calls, total, chunks)


def report(costs: dict[str, Cost]) -> str:
    """The table and the layers' differences, as markdown (whole µs: no "-0")."""
    per = {name: [round(x) for x in cost.per_call_us()] for name, cost in costs.items()}
    calls = min(cost.calls for cost in costs.values())
    lines = [
        f"µs per call, means over {calls} calls of each on one pooled connection (server "
        "CPU: every local `postgres` process, read in 10 ms clock ticks around each chunk, "
        "so differences of a few tens of µs are within its resolution; the rest is "
        "waiting):",
        "",
        "| way | wall | client CPU | server CPU | rest |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, (wall, client, server, rest) in per.items():
        lines.append(f"| {LABELS[name]} | {wall} | {client} | {server} | {rest} |")
    floor = per["two_commits"][0]
    lines += [
        "",
        f"Against the floor ({floor} µs): @effect {per['effect'][0] / floor:.2f}x (a ratio of "
        "means here; `run.py`'s target is a ratio of medians on a pool of 4).",
    ]
    layers = (
        ("the runner and the call's preparation (key, input hash)", "effect", "journal"),
        (
            "the journal's Python (its connection source, parameters, serializing)",
            "journal",
            "statements",
        ),
        ("the journal's statements over two plain inserts", "statements", "two_commits"),
    )
    lines += ["", "| layer | wall | client CPU | server CPU |", "|---|---:|---:|---:|"]
    for label, upper, lower in layers:
        a, b = per[upper], per[lower]
        lines.append(f"| {label} | {a[0] - b[0]:+d} | {a[1] - b[1]:+d} | {a[2] - b[2]:+d} |")
    alone = per["in_memory"][1]
    between = per["journal_then_in_memory"][1] - per["journal"][1]
    lines += [
        "",
        f"Python between round trips: the @effect call on an in-memory journal takes {alone} "
        f"µs of client CPU alone and adds {between} µs after the journal's two statements "
        f"({between / max(alone, 1):.1f}x).",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--dsn")
    parser.add_argument("--calls", type=int, default=5000, help="calls of each way")
    parser.add_argument("--chunks", type=int, default=10, help="turns the ways take")
    args = parser.parse_args()
    if args.calls < 1 or args.chunks < 1:
        parser.error("--calls and --chunks must be positive")
    server, embedded = resolve_dsn(args.dsn)
    try:
        with scratch_database(server, "profile_effect") as dsn, ours(dsn, 1) as saver:
            pool: ConnectionPool[Connection[DictRow]] = saver.conn  # type: ignore[assignment]
            if postgres_cpu_seconds() == 0:
                print("No local `postgres` process: the server CPU column reads 0.\n")
            print(report(measure(calls_of(pool), args.calls, args.chunks)))
    finally:
        if embedded is not None:
            embedded.stop()


if __name__ == "__main__":
    main()
