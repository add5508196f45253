"""Reads on big threads, and storage per step of a long chat.

Latest-checkpoint fetch and `list(limit=10)`: threads of e.g. 100, 10,000 and 100,000
checkpoints are bulk-loaded with COPY into one database next to 2,000 short threads (5
checkpoints each), so the table is dominated by the big thread while the average thread, all
that the planner knows of a thread it cannot see, is small. The rows are made by the saver's
own pure row builders (`_core.checkpoint_row`, `blob_params`, `write_params`) from
checkpoints shaped like a chat loop's: a `messages` channel stored as a blob (a window of
recent messages) with a new version at every checkpoint, an inline branch channel, and the
next task's pending writes. Both savers read the same rows, which is checked before timing.

The load goes into a database with upstream's own schema (what `PostgresSaver.setup()`
creates); a copy of it (same rows, same statistics) gets our `setup()`. Upstream on its
schema, ours, and upstream on our schema (which tells an index from a query improvement) are
then timed interleaved.

Storage: a 200-turn chat (`messages` with `add_messages`, seeded text of varied length) is
run through each saver in a database of its own; bytes per step is the growth of the three
tables (`pg_total_relation_size`, indexes and TOAST included) over the checkpoints written.
Settings measured for the same chat: `messages` in a `DeltaChannel` (each message stored
once, as a write, instead of the whole list at every step; the recommended setting), and
ours with the value columns' TOAST compression set back to Postgres' default pglz (our
`setup()` makes it lz4, which is faster to write and 13-16% bigger for message lists;
transparent to both savers). Message lists are compressed by TOAST either way;
deduplicating them inside the row format would make the rows unreadable to upstream, and
DeltaChannel already stores each message once.
"""

from __future__ import annotations

import random
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Annotated, Any

import psycopg
from bench_common import Stats, ours, scratch_database, timed_ms, upstream, upstream_single
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.channels.delta import DeltaChannel
from langgraph.checkpoint.base import BaseCheckpointSaver, Checkpoint, CheckpointMetadata
from langgraph.checkpoint.base.id import uuid6
from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.graph.message import add_messages
from typing_extensions import TypedDict

from langgraph_durable.checkpoint import _core

_WORD_TEXT = (
    "the order customer refund account invoice payment shipping delivery address please "
    "thanks could would should we you they it is was were be been have has had do does "
    "did not and or but if then because when while after before about with without from "
    "into over under again further once here there where why how all any both each few "
    "more most other some such only own same so than too very can will just now today "
    "tomorrow yesterday week month year day time number total amount price discount "
    "coupon code product item package box label tracking carrier warehouse stock return "
    "exchange replacement damaged missing late early status update change cancel confirm "
    "email phone message support agent manager team policy rule limit approval review "
    "request ticket case issue problem error failure success detail information record "
    "history note summary report statement balance credit card bank transfer fee tax "
    "charge billing plan subscription renewal trial upgrade downgrade feature service "
    "north wind northwind eighty ninety forty twenty hundred thousand first second third "
    "last next new old small large quick slow happy sorry sure certainly unfortunately "
    "however therefore meanwhile also still already yet almost quite rather really "
    "checked found looked asked told sent received shipped packed scheduled expected "
    "arrived processed approved rejected issued refunded charged credited noted logged"
)
WORDS = _WORD_TEXT.split()


def sentence(rng: random.Random) -> str:
    words = [rng.choice(WORDS) for _ in range(rng.randint(4, 22))]
    return " ".join(words).capitalize() + rng.choice(".......?!")


def text(rng: random.Random, sentences_low: int, sentences_high: int) -> str:
    return " ".join(sentence(rng) for _ in range(rng.randint(sentences_low, sentences_high)))


def chat_script(turns: int, seed: int = 8890) -> list[tuple[str, str]]:
    """(user text, assistant text) per turn: short questions, replies of varied length."""
    rng = random.Random(seed)
    return [(text(rng, 1, 4), text(rng, 1, 14)) for _ in range(turns)]


# ---------------------------------------------------------------------------------------
# Bulk load


class _MemoSerde:
    """The real serializer, remembering the output for the few value objects reused."""

    def __init__(self, serde: SerializerProtocol) -> None:
        self._serde = serde
        self._done: dict[int, tuple[Any, tuple[str, bytes]]] = {}

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        found = self._done.get(id(obj))
        if found is None or found[0] is not obj:
            found = (obj, self._serde.dumps_typed(obj))
            self._done[id(obj)] = found
        return found[1]

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        return self._serde.loads_typed(data)


def _version(counter: int, rng: random.Random) -> str:
    return f"{counter:032}.{rng.random():016}"  # upstream's format (`_core.next_version`)


@dataclass
class _Rows:
    checkpoints: list[tuple[Any, ...]]
    blobs: list[tuple[Any, ...]]
    writes: list[tuple[Any, ...]]


def _thread_rows(
    serde: SerializerProtocol,
    thread_id: str,
    size: int,
    windows: Sequence[list[AnyMessage]],
    replies: Sequence[list[AnyMessage]],
    rng: random.Random,
    batch: _Rows,
) -> Iterator[None]:
    """Adds the rows of a chat-loop thread of `size` checkpoints to `batch`, yielding after
    each checkpoint so that the caller can flush the batch."""
    start_version = _version(1, rng)
    first_ts = datetime(2026, 1, 1, tzinfo=timezone.utc)
    parent: str | None = None
    previous_version = start_version
    for i in range(size):
        checkpoint_id = str(uuid6(clock_seq=i))
        version = _version(i + 2, rng)
        checkpoint: Checkpoint = {
            "v": 4,
            "id": checkpoint_id,
            "ts": (first_ts + timedelta(seconds=i)).isoformat(),
            "channel_values": {
                "messages": windows[i % len(windows)],
                "branch:to:assistant": None,
            },
            "channel_versions": {
                "__start__": start_version,
                "messages": version,
                "branch:to:assistant": version,
            },
            "versions_seen": {
                "__input__": {},
                "__start__": {"__start__": start_version},
                "assistant": {"branch:to:assistant": previous_version},
            },
            "updated_channels": ["branch:to:assistant", "messages"],
        }
        metadata: CheckpointMetadata = {"source": "loop", "step": i, "parents": {}}
        config: RunnableConfig = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
        if parent is not None:
            config["configurable"]["checkpoint_id"] = parent
        row, blob_values = _core.checkpoint_row(config, checkpoint, metadata)
        blobs = _core.blob_params(
            serde, blob_values, {"messages": version, "branch:to:assistant": version}
        )
        batch.checkpoints.append(
            (
                row["thread_id"],
                row["checkpoint_ns"],
                row["checkpoint_id"],
                row["parent_checkpoint_id"],
                row["checkpoint"],
                row["metadata"],
            )
        )
        batch.blobs.extend(
            (thread_id, "", *blob)
            for blob in zip(
                blobs["channels"], blobs["versions"], blobs["types"], blobs["blobs"], strict=True
            )
        )
        writes = _core.write_params(
            serde,
            {"configurable": {**config["configurable"], "checkpoint_id": checkpoint_id}},
            [("messages", replies[i % len(replies)]), ("branch:to:assistant", None)],
            str(uuid.UUID(int=rng.getrandbits(128))),
            "~__pregel_pull, assistant",
        )
        batch.writes.extend(
            (
                thread_id,
                "",
                checkpoint_id,
                writes["task_id"],
                writes["task_path"],
                *w,
            )
            for w in zip(
                writes["idxs"], writes["channels"], writes["types"], writes["blobs"], strict=True
            )
        )
        parent, previous_version = checkpoint_id, version
        yield None


def _copy(cur: psycopg.Cursor[Any], statement: str, rows: list[tuple[Any, ...]]) -> None:
    with cur.copy(statement) as copy:
        for row in rows:
            copy.write_row(row)


def bulk_load(
    dsn: str, sizes: Sequence[int], background: tuple[int, int], seed: int = 8890
) -> dict[int, str]:
    """Loads one chat thread per size, plus `background` = (threads, checkpoints each)
    short threads; returns the measured thread ids by size."""
    rng = random.Random(seed)
    serde = _MemoSerde(JsonPlusSerializer())
    script = chat_script(64, seed)
    messages: list[AnyMessage] = []
    for i, (question, answer) in enumerate(script):
        messages.append(HumanMessage(question, id=f"h{i}"))
        messages.append(AIMessage(answer, id=f"a{i}"))
    windows = [messages[max(0, i - 3) : i + 1] for i in range(len(messages))]
    replies: list[list[AnyMessage]] = [[m] for m in messages if isinstance(m, AIMessage)]
    threads = {size: f"bench-thread-{size}" for size in sizes}
    count, each = background
    loads = [*((thread_id, size) for size, thread_id in threads.items())]
    loads += [(f"bench-short-{k}", each) for k in range(count)]
    with psycopg.connect(dsn, autocommit=True) as conn, conn.cursor() as cur:

        def flush(batch: _Rows) -> None:
            _copy(
                cur,
                "COPY checkpoints (thread_id, checkpoint_ns, checkpoint_id, "
                "parent_checkpoint_id, checkpoint, metadata) FROM STDIN",
                batch.checkpoints,
            )
            _copy(
                cur,
                "COPY checkpoint_blobs (thread_id, checkpoint_ns, channel, version, type, "
                "blob) FROM STDIN",
                batch.blobs,
            )
            _copy(
                cur,
                "COPY checkpoint_writes (thread_id, checkpoint_ns, checkpoint_id, task_id, "
                "task_path, idx, channel, type, blob) FROM STDIN",
                batch.writes,
            )

        batch = _Rows([], [], [])
        for thread_id, size in loads:
            for _ in _thread_rows(serde, thread_id, size, windows, replies, rng, batch):
                if len(batch.checkpoints) >= 5000:
                    flush(batch)
                    batch.checkpoints, batch.blobs, batch.writes = [], [], []
        if batch.checkpoints:
            flush(batch)
        cur.execute("VACUUM ANALYZE checkpoints, checkpoint_blobs, checkpoint_writes")
    return threads


# ---------------------------------------------------------------------------------------
# Reads


def _same_reads(a: BaseCheckpointSaver[Any], b: BaseCheckpointSaver[Any], thread: str) -> None:
    """Both savers read the loaded thread alike (so the rows are in the shared format)."""
    config: Any = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
    left, right = a.get_tuple(config), b.get_tuple(config)
    assert left is not None, f"no checkpoint read from {thread}"
    assert right is not None, f"no checkpoint read from {thread}"
    assert left.checkpoint["id"] == right.checkpoint["id"]
    assert left.checkpoint["channel_values"] == right.checkpoint["channel_values"]
    assert len(left.checkpoint["channel_values"]["messages"]) == 4
    assert left.pending_writes == right.pending_writes
    assert left.pending_writes is not None
    assert len(left.pending_writes) == 2
    listed = [t.checkpoint["id"] for t in a.list(config, limit=10)]
    assert listed == [t.checkpoint["id"] for t in b.list(config, limit=10)]
    assert len(listed) == 10
    assert listed[0] == left.checkpoint["id"]


def _time_reads(
    savers: dict[str, BaseCheckpointSaver[Any]],
    threads: dict[int, str],
    reps: int,
    warmup: int,
    budget_s: float = 2.0,
    min_reps: int = 8,
) -> dict[tuple[str, str, int], Stats]:
    """Interleaved samples of each (saver, read, thread); a read slower than `budget_s` in
    total stops at `min_reps` samples (a 0.6 s read needs no 60 samples)."""
    calls: dict[tuple[str, str, int], Callable[[], Any]] = {}
    for name, saver in savers.items():
        for size, thread in threads.items():
            # What a user passes: the thread, nothing else.
            config: Any = {"configurable": {"thread_id": thread}}

            def latest(saver: Any = saver, config: Any = config) -> Any:
                return saver.get_tuple(config)

            def listed(saver: Any = saver, config: Any = config) -> Any:
                return list(saver.list(config, limit=10))

            calls[(name, "latest", size)] = latest
            calls[(name, "list10", size)] = listed
    # Each statement runs once per thread size and round, so a few rounds take every
    # prepared statement past the plan cache's first five custom plans.
    for _ in range(warmup):
        for call in calls.values():
            call()
    samples: dict[tuple[str, str, int], list[float]] = {key: [] for key in calls}
    order = list(calls)
    shuffler = random.Random(11)
    for _ in range(reps):
        shuffler.shuffle(order)
        for key in order:
            taken = samples[key]
            if len(taken) >= min_reps and sum(taken) > budget_s * 1000:
                continue
            taken.append(timed_ms(calls[key]))
    return {key: Stats.of(values) for key, values in samples.items()}


@dataclass
class ReadResults:
    """ms by (saver, "latest" | "list10", thread size); savers: "upstream" (on its own
    schema), "ours", and "upstream_migrated" (upstream on the schema after our setup)."""

    stats: dict[tuple[str, str, int], Stats]
    load_seconds: float


def reads(
    server_dsn: str, sizes: Sequence[int], background: tuple[int, int], reps: int, warmup: int
) -> ReadResults:
    """Loads the threads once under upstream's schema, copies the database and runs our
    setup on the copy; then times all three (saver, schema) pairs interleaved."""
    with scratch_database(server_dsn, "reads_upstream") as upstream_dsn:
        with upstream(upstream_dsn, 1):
            pass  # upstream's own setup() only
        began = time.perf_counter()
        threads = bulk_load(upstream_dsn, sizes, background)
        load_seconds = time.perf_counter() - began
        # The copy has the same rows and the same statistics (pg_statistic is copied too).
        with (
            scratch_database(server_dsn, "reads_ours", copy_of=upstream_dsn) as ours_dsn,
            upstream(upstream_dsn, 2, setup=False) as up,
            upstream_single(upstream_dsn, setup=False) as single,
            ours(ours_dsn, 2) as our,
            upstream(ours_dsn, 2, setup=False) as migrated,
        ):
            _same_reads(our, up, threads[max(sizes)])
            stats = _time_reads(
                {
                    "upstream_pool": up,
                    "upstream_single": single,
                    "ours": our,
                    "upstream_migrated": migrated,
                },
                threads,
                reps,
                warmup,
            )
    return ReadResults(stats, load_seconds)


# ---------------------------------------------------------------------------------------
# Storage


def _add_message_batches(
    state: list[AnyMessage] | None, batches: Sequence[Any]
) -> list[AnyMessage]:
    """`add_messages` as a `DeltaChannel` reducer: one batch of writes at a time."""
    merged: Any = state or []
    for batch in batches:
        merged = add_messages(merged, batch)
    return list(merged)


class DeltaMessagesState(TypedDict):
    """`MessagesState` with the messages in a `DeltaChannel` (beta): stored as deltas."""

    messages: Annotated[list[AnyMessage], DeltaChannel(_add_message_batches)]


def chat_graph(
    script: Sequence[tuple[str, str]], delta: bool = False
) -> StateGraph[Any, Any, Any, Any]:
    """One assistant node; its reply is the next scripted answer."""

    def assistant(state: Any) -> dict[str, list[AnyMessage]]:
        turn = sum(isinstance(m, AIMessage) for m in state["messages"])
        return {"messages": [AIMessage(script[turn][1])]}

    builder: StateGraph[Any, Any, Any, Any] = StateGraph(
        DeltaMessagesState if delta else MessagesState
    )
    builder.add_node("assistant", assistant)
    builder.add_edge(START, "assistant")
    return builder


PGLZ = (
    "ALTER TABLE checkpoint_blobs ALTER COLUMN blob SET COMPRESSION pglz",
    "ALTER TABLE checkpoint_writes ALTER COLUMN blob SET COMPRESSION pglz",
    "ALTER TABLE checkpoints ALTER COLUMN checkpoint SET COMPRESSION pglz",
)
"""Our value columns back on Postgres' default compression (`setup()` makes them lz4)."""


def _table_bytes(dsn: str) -> int:
    with psycopg.connect(dsn, autocommit=True) as conn:
        found = conn.execute(
            "SELECT pg_total_relation_size('checkpoints') + "
            "pg_total_relation_size('checkpoint_blobs') + "
            "pg_total_relation_size('checkpoint_writes')"
        ).fetchone()
    assert found is not None
    return int(found[0])


def _checkpoints(dsn: str) -> int:
    with psycopg.connect(dsn, autocommit=True) as conn:
        found = conn.execute("SELECT count(*) FROM checkpoints").fetchone()
    assert found is not None
    return int(found[0])


@dataclass(frozen=True)
class StorageResult:
    total_bytes: int
    steps: int

    @property
    def per_step(self) -> float:
        return self.total_bytes / self.steps


@contextmanager
def _saver(name: str, dsn: str) -> Iterator[BaseCheckpointSaver[Any]]:
    with upstream(dsn, 4) if name == "upstream" else ours(dsn, 4) as saver:
        yield saver


def storage(server_dsn: str, turns: int) -> dict[str, StorageResult]:
    """Bytes the three tables grow by, per checkpoint, for a `turns`-turn chat thread.

    Keyed by saver ("upstream", "ours"), by "<saver>_delta" for the same chat with the
    messages in a `DeltaChannel`, a graph-side change both savers support, and "ours_pglz"
    for ours with the value columns on Postgres' default pglz compression.
    """
    script = chat_script(turns)
    results: dict[str, StorageResult] = {}
    for key in ("upstream", "ours", "upstream_delta", "ours_delta", "ours_pglz"):
        name = key.split("_")[0]
        with scratch_database(server_dsn, f"storage_{key}") as dsn, _saver(name, dsn) as saver:
            if key.endswith("_pglz"):
                with psycopg.connect(dsn, autocommit=True) as conn:
                    for statement in PGLZ:
                        conn.execute(statement)
            empty = _table_bytes(dsn)
            graph = chat_graph(script, delta=key.endswith("_delta")).compile(checkpointer=saver)
            config: Any = {"configurable": {"thread_id": "chat"}}
            for question, _ in script:
                graph.invoke({"messages": [HumanMessage(question)]}, config, durability="sync")
            state = graph.get_state(config)
            assert len(state.values["messages"]) == 2 * turns
            results[key] = StorageResult(_table_bytes(dsn) - empty, _checkpoints(dsn))
    return results
