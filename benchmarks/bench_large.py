"""Large channel values: `put` and `get_tuple` of one checkpoint holding a 1 KB, 1 MB or
50 MB value, or a chat's message list, ours against upstream's `PostgresSaver` in both
setups, interleaved.

    python benchmarks/bench_large.py [--dsn DSN] [--sizes 1e3,1e6,5e7] [--messages 400]
        [--reps 5]
    python benchmarks/bench_large.py [--dsn DSN] --sizes 1e3 --profile [--calls 5000]

The value is a dict holding seeded text of random words (`{"doc": text}`), so it is stored
as a blob (msgpack) and Postgres compresses it as it would a real document; every write
goes to a new thread, and the read is the thread's latest checkpoint (what a resumed run
loads), checked against the value written. Each saver writes to a database of its own
schema; upstream's two setups share one.

The message list (`chat`: alternating human and AI messages with ids, response metadata
and token usage, as a chat model returns them) is what a chat agent's `messages` channel
holds: every turn starts by reading it back, and each message is a custom value the
reader must build (our savers check each one's class first, `serde.py`).

`--profile` splits the calls of the first size into wall time, this process's CPU and the
server's CPU per call, for each saver (`profile`), next to each saver's statements alone on
a connection of their own (`statements_alone`): what a `put` adds to them is the saver's
own layer.
"""

from __future__ import annotations

import argparse
import collections
import random
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

import psycopg
from bench_common import (
    UPSTREAM_KWARGS,
    Stats,
    costs_in_turns,
    ours,
    scratch_database,
    upstream,
    upstream_single,
)
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langgraph.checkpoint.base import BaseCheckpointSaver, empty_checkpoint
from langgraph.checkpoint.postgres import PostgresSaver
from psycopg.rows import tuple_row
from psycopg.types.json import Jsonb

from langgraph_durable import DurablePostgresSaver
from langgraph_durable._db import CONNECTION_KWARGS
from langgraph_durable._sql import put_checkpoint_statement

SAVERS = ("ours", "upstream_single", "upstream_pool")


def document(size: int, seed: int = 1) -> dict[str, str]:
    """A dict holding `size` characters of seeded text of random words."""
    rng = random.Random(seed)
    words = [
        "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(2, 9)))
        for _ in range(5000)
    ]
    text = " ".join(rng.choices(words, k=size // 5 + 1))
    while len(text) < size:
        text += " " + text
    return {"doc": text[:size]}


def chat(count: int, seed: int = 1) -> list[AnyMessage]:
    """`count` messages of a seeded chat: questions of 30-60 words, answers of 60-150, each
    answer with the response metadata and token usage a chat model returns."""
    rng = random.Random(seed)
    words = document(20_000, seed)["doc"].split()

    def text(low: int, high: int) -> str:
        return " ".join(rng.choices(words, k=rng.randint(low, high)))

    messages: list[AnyMessage] = []
    for turn in range(count // 2 + 1):
        messages.append(HumanMessage(content=text(30, 60), id=f"human-{turn}"))
        answer = text(60, 150)
        used = len(answer) // 4
        messages.append(
            AIMessage(
                content=answer,
                id=f"ai-{turn}",
                response_metadata={"model_name": "chat-model", "finish_reason": "stop"},
                usage_metadata={
                    "input_tokens": 40 * turn + 50,
                    "output_tokens": used,
                    "total_tokens": 40 * turn + 50 + used,
                },
            )
        )
    return messages[:count]


def _put(saver: BaseCheckpointSaver[Any], value: Any) -> str:
    """`put` a checkpoint holding `value` on a new thread; the thread's id."""
    checkpoint = empty_checkpoint()
    version = saver.get_next_version(None, None)
    checkpoint["channel_values"] = {"big": value}
    checkpoint["channel_versions"] = {"big": version}
    thread = str(uuid.uuid4())
    config: Any = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
    saver.put(config, checkpoint, {"source": "loop", "step": 1}, {"big": version})
    return thread


def _get(saver: BaseCheckpointSaver[Any], thread: str, value: Any) -> None:
    """`get_tuple` of a thread's latest checkpoint, checked against the value written."""
    found = saver.get_tuple({"configurable": {"thread_id": thread}})
    if found is None or found.checkpoint["channel_values"]["big"] != value:
        raise AssertionError("the value read back differs from the one written")


def _write_and_read(saver: BaseCheckpointSaver[Any], value: Any) -> tuple[float, float]:
    """ms of one `put` of a checkpoint holding `value`, and of the `get_tuple` after it."""
    began = time.perf_counter()
    thread = _put(saver, value)
    wrote = time.perf_counter()
    _get(saver, thread, value)
    read = time.perf_counter()
    return (wrote - began) * 1000, (read - wrote) * 1000


CHAT_OPS = ("chat_write", "chat_read")
"""The ops of a message list's rows; "write" and "read" are a document's."""


def large_values(
    upstream_dsn: str,
    ours_dsn: str,
    sizes: tuple[int, ...],
    reps: int,
    message_counts: tuple[int, ...] = (),
) -> dict[tuple[str, str, int], Stats]:
    """ms keyed by (saver, "write" | "read", size in bytes) for a document and by (saver,
    "chat_write" | "chat_read", messages) for a message list; savers interleaved."""
    samples: dict[tuple[str, str, int], list[float]] = {}
    values: list[tuple[str, str, int, Any, int]] = [
        # Small values are cheap: take more samples of them.
        (
            "write",
            "read",
            size,
            document(size),
            reps if size >= 10_000_000 else reps * (20 if size >= 100_000 else 200),
        )
        for size in sizes
    ]
    values += [(*CHAT_OPS, count, chat(count), reps * 20) for count in message_counts]
    with ExitStack() as stack:
        savers: dict[str, BaseCheckpointSaver[Any]] = {
            "ours": stack.enter_context(ours(ours_dsn, 4)),
            "upstream_single": stack.enter_context(upstream_single(upstream_dsn)),
            "upstream_pool": stack.enter_context(upstream(upstream_dsn, 4, setup=False)),
        }
        for write, read, size, value, count in values:
            for saver in savers.values():  # warm up: prepared statements, connections
                _write_and_read(saver, value)
            order = list(savers)
            shuffler = random.Random(size)
            for _ in range(count):
                shuffler.shuffle(order)
                for name in order:
                    wrote, took = _write_and_read(savers[name], value)
                    samples.setdefault((name, write, size), []).append(wrote)
                    samples.setdefault((name, read, size), []).append(took)
    return {key: Stats.of(values) for key, values in samples.items()}


def profile(upstream_dsn: str, ours_dsn: str, size: int, calls: int, chunks: int = 10) -> str:
    """Where a call's time goes, per saver: wall, this process's CPU and the server's CPU
    (every local `postgres` process, from /proc) per `put` and per `get_tuple` of a `size`
    value, as markdown. Savers and calls take turns in `chunks` chunks; each read is of a
    thread the same saver wrote before (a stock of them is written first)."""
    value = document(size)
    with ExitStack() as stack:
        savers: dict[str, BaseCheckpointSaver[Any]] = {
            "ours": stack.enter_context(ours(ours_dsn, 4)),
            "upstream_single": stack.enter_context(upstream_single(upstream_dsn)),
            "upstream_pool": stack.enter_context(upstream(upstream_dsn, 4, setup=False)),
        }
        written: dict[str, collections.deque[str]] = {}
        ways: dict[tuple[str, str], Callable[[], Any]] = {}
        for name, saver in savers.items():
            # Warm up (prepared statements, connections), and leave a stock of threads so
            # that a turn that reads before it writes finds threads to read.
            stock = collections.deque(_put(saver, value) for _ in range(calls // chunks + 1))
            _get(saver, stock[0], value)
            written[name] = stock

            def put(saver: BaseCheckpointSaver[Any] = saver, name: str = name) -> None:
                written[name].append(_put(saver, value))

            def get(saver: BaseCheckpointSaver[Any] = saver, name: str = name) -> None:
                _get(saver, written[name].popleft(), value)

            ways[(name, "put")] = put
            ways[(name, "get_tuple")] = get
        ours_saver = savers["ours"]
        assert isinstance(ours_saver, DurablePostgresSaver)
        ways[("ours", "put statement alone")] = stack.enter_context(
            statements_alone(ours_saver, ours_dsn, value)
        )
        upstream_saver = savers["upstream_single"]
        assert isinstance(upstream_saver, PostgresSaver)
        ways[("upstream", "put statements alone (pipeline)")] = stack.enter_context(
            upstream_statements_alone(upstream_saver, upstream_dsn, value)
        )
        costs = costs_in_turns(ways, calls, chunks)
    done = min(cost.calls for cost in costs.values())
    lines = [
        f"µs per call of a {size:,}-character value, {done} calls of each, means (server "
        "CPU: every local `postgres` process, read in 10 ms clock ticks before and after "
        f"each of {min(chunks, calls)} chunks, so differences of a few tens of µs are within "
        "its resolution; the rest is waiting):",
        "",
        "| saver | call | wall | client CPU | server CPU | rest |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for (name, op), cost in costs.items():
        w, c, k, rest = (round(x) for x in cost.per_call_us())
        lines.append(f"| {name} | {op} | {w} | {c} | {k} | {rest} |")

    def added(put: tuple[str, str], alone: tuple[str, str]) -> str:
        wall = costs[put].per_call_us()[0] - costs[alone].per_call_us()[0]
        client = costs[put].per_call_us()[1] - costs[alone].per_call_us()[1]
        return f"{wall:.0f} µs of wall time and {client:.0f} of client CPU"

    lines += [
        "",
        "What each saver's `put` adds to its statements alone (its own layer): ours "
        + added(("ours", "put"), ("ours", "put statement alone"))
        + ", upstream's (one connection) "
        + added(("upstream_single", "put"), ("upstream", "put statements alone (pipeline)"))
        + ".",
    ]
    return "\n".join(lines)


@contextmanager
def statements_alone(
    saver: DurablePostgresSaver, dsn: str, value: Any
) -> Iterator[Callable[[], None]]:
    """Our `put`'s statement with the parameters of a real put of `value` (each call on a
    new thread), sent on a connection of its own: the statement without the saver."""
    captured: list[dict[str, Any]] = []
    combiner = saver._combiner  # what put hands its statement's parameters to
    store = combiner.store

    def keep(params: dict[str, Any]) -> None:
        captured.append(params)
        store(params)

    combiner.store = keep  # type: ignore[method-assign]
    try:
        _put(saver, value)
    finally:
        combiner.store = store  # type: ignore[method-assign]
    (params,) = captured
    with psycopg.connect(dsn, **CONNECTION_KWARGS) as conn:

        def send() -> None:
            query, args = put_checkpoint_statement({**params, "thread_id": str(uuid.uuid4())})
            conn.cursor(row_factory=tuple_row).execute(query, args)

        yield send


@contextmanager
def upstream_statements_alone(
    saver: PostgresSaver, dsn: str, value: Any
) -> Iterator[Callable[[], None]]:
    """Upstream's two statements for a put of `value` (its blob, then its checkpoint, in a
    pipeline as its `put` sends them), each call on a new thread, on a connection of its
    own, its serializer's bytes computed once."""
    checkpoint = empty_checkpoint()
    version = saver.get_next_version(None, None)
    checkpoint["channel_versions"] = {"big": version}
    kind, blob = saver.serde.dumps_typed(value)
    metadata = {"source": "loop", "step": 1}
    with psycopg.connect(dsn, **UPSTREAM_KWARGS) as conn:

        def send() -> None:
            thread = str(uuid.uuid4())
            with conn.pipeline(), conn.cursor(binary=True) as cur:
                cur.executemany(
                    PostgresSaver.UPSERT_CHECKPOINT_BLOBS_SQL,
                    [(thread, "", "big", version, kind, blob)],
                )
                cur.execute(
                    PostgresSaver.UPSERT_CHECKPOINTS_SQL,
                    (thread, "", checkpoint["id"], None, Jsonb(checkpoint), Jsonb(metadata)),
                )

        yield send


def _main() -> None:
    from langgraph_durable.embedded import resolve_dsn

    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--dsn")
    parser.add_argument("--sizes", default="1e3,1e6,5e7")
    parser.add_argument("--messages", default="400", help="message counts of chats ('': none)")
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument(
        "--profile",
        action="store_true",
        help="per saver and call: wall time, client CPU and server CPU (first size only)",
    )
    parser.add_argument("--calls", type=int, default=5000, help="calls of each with --profile")
    args = parser.parse_args()
    sizes = tuple(int(float(x)) for x in args.sizes.split(",") if x)
    counts = tuple(int(x) for x in args.messages.split(",") if x)
    if args.calls < 1 or args.reps < 1:
        parser.error("--calls and --reps must be positive")
    dsn, embedded = resolve_dsn(args.dsn)
    try:
        with (
            scratch_database(dsn, "large_upstream") as upstream_dsn,
            scratch_database(dsn, "large_ours") as ours_dsn,
        ):
            if args.profile:
                print(profile(upstream_dsn, ours_dsn, sizes[0], args.calls))
                return
            found = large_values(upstream_dsn, ours_dsn, sizes, args.reps, counts)
    finally:
        if embedded is not None:
            embedded.stop()
    for (name, op, size), stats in sorted(found.items(), key=lambda kv: (kv[0][2], kv[0][1])):
        print(f"{size:>10,} {op:5s} {name:16s} {stats.median:10.2f} ms (p95 {stats.p95:.2f})")


if __name__ == "__main__":
    _main()
