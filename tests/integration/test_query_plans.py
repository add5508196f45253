"""Reads stay index-driven on a huge thread: proven with EXPLAIN, not with timers.

The data is built with SQL in the shape the saver writes: one thread with 20,000 checkpoints
(plus 500 in a subgraph namespace) next to 2,000 threads of 3, so the big thread dominates
the table the way a long-running chat does in production, while the *average* thread, which
is all a generic plan knows about, is tiny. One more thread ends with a long subgraph: 2,000
checkpoints in its namespace are newer than the root's latest, so a read of the root that
walked the thread newest first would pass them all. Statistics are taken from every row, so
the plans are the same on every run.

The SQL checked is what the savers really send: their connections use a cursor that records
every `execute`/`executemany`, and the recorded text is explained with the recorded
parameters, both as the custom plan made for those values and as a generic plan
(`plan_cache_mode = force_generic_plan` via PREPARE/EXECUTE). Generic plans are not
hypothetical: the saver's pool prepares its statements, and after five executions the server
may keep one plan for every thread (`test_the_savers_own_pool_prepares_its_reads`). Beyond
the plan shapes, EXPLAIN ANALYZE row counts (TIMING OFF) show how many rows a read takes from
the tables, which must not grow with the thread; upstream's SQL for the same reads, which
does, is the control that shows the data is big enough to tell.

The second half runs a real graph with `DeltaChannel`s 2,000 steps deep and checks that
`get_delta_channel_history` is one statement, agrees with the base class's walk via
`get_tuple`, and that `prune(keep_latest)` keeps the state rebuildable.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Annotated, Any, cast

import psycopg
import pytest
from _pg import create_database, drop_database
from langchain_core.runnables import RunnableConfig
from langgraph.channels.delta import DeltaChannel
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.graph import END, START, StateGraph
from psycopg import sql
from psycopg.abc import Params, Query, QueryNoTemplate
from psycopg.rows import DictRow, dict_row
from psycopg_pool import ConnectionPool
from typing_extensions import LiteralString, Self, TypedDict

from langgraph_durable import AsyncDurablePostgresSaver, DurablePostgresSaver
from langgraph_durable._db import CONNECTION_KWARGS
from langgraph_durable._sql import QUERIES

# One set of connection settings serves both flavours.
ASYNC_CONNECTION_KWARGS = SYNC_CONNECTION_KWARGS = CONNECTION_KWARGS

TABLES = frozenset({"checkpoints", "checkpoint_blobs", "checkpoint_writes"})
CHECKPOINT_INDEXES = frozenset({"checkpoints_pkey", "lgd_checkpoints_thread_id_checkpoint_id_idx"})

BIG = "big-thread"
SUB_NS = "sub:1"
N_BIG = 20_000
N_SUB = 500
TAIL = "subgraph-last"
TAIL_NS = "sub:2"
N_TAIL_ROOT = 100
N_TAIL_SUB = 2_000
N_SMALL_THREADS = 2_000
N_SMALL = 3


def cid(i: int) -> str:
    """Checkpoint ids sort as text like upstream's uuid6 ids: zero-padded counters."""
    return f"{i:020d}"


# ---------------------------------------------------------------------------------------
# Recording what the savers send
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Sent:
    """One statement as handed to psycopg: text, parameters (one set per executemany), and
    the `prepare` argument (None: the connection's prepare_threshold decides)."""

    query: str
    params: Any
    many: bool = False
    prepare: bool | None = None

    @property
    def may_get_a_generic_plan(self) -> bool:
        """Whether the server can end up running this statement from a generic plan.

        Only prepared statements can: an unprepared one is planned for its values each
        time. The saver's connections prepare statements unless told `prepare=False`.
        """
        threshold = SYNC_CONNECTION_KWARGS.get("prepare_threshold", 5)
        return self.prepare is True or (self.prepare is None and threshold is not None)


def skip_unless_prepared(sent: Sent, mode: str) -> None:
    if mode == "generic" and not sent.may_get_a_generic_plan:
        pytest.skip("the saver never prepares this statement, so it never gets a generic plan")


SENT: list[Sent] = []


def _text(query: Query) -> str:
    if isinstance(query, bytes):
        return query.decode()
    if isinstance(query, str):
        return query
    raise AssertionError(f"unexpected query type {type(query).__name__}")


class TracingCursor(psycopg.Cursor[DictRow]):
    """Records each statement before psycopg sends it."""

    def execute(
        self,
        query: Query,
        params: Params | None = None,
        *,
        prepare: bool | None = None,
        binary: bool | None = None,
    ) -> Self:
        SENT.append(Sent(_text(query), params, prepare=prepare))
        # _text() rejects t-string templates, so the query is one of the plain kinds.
        plain = cast(QueryNoTemplate, query)
        return super().execute(plain, params, prepare=prepare, binary=binary)

    def executemany(
        self, query: Query, params_seq: Iterable[Params], *, returning: bool = False
    ) -> None:
        params_list = list(params_seq)
        SENT.append(Sent(_text(query), params_list, many=True))
        super().executemany(query, params_list, returning=returning)


class AsyncTracingCursor(psycopg.AsyncCursor[DictRow]):
    """Records each statement before psycopg sends it."""

    async def execute(
        self,
        query: Query,
        params: Params | None = None,
        *,
        prepare: bool | None = None,
        binary: bool | None = None,
    ) -> Self:
        SENT.append(Sent(_text(query), params, prepare=prepare))
        plain = cast(QueryNoTemplate, query)
        return await super().execute(plain, params, prepare=prepare, binary=binary)

    async def executemany(
        self, query: Query, params_seq: Iterable[Params], *, returning: bool = False
    ) -> None:
        params_list = list(params_seq)
        SENT.append(Sent(_text(query), params_list, many=True))
        await super().executemany(query, params_list, returning=returning)


@contextmanager
def recording() -> Iterator[list[Sent]]:
    """Collects the statements sent inside the block."""
    SENT.clear()
    found: list[Sent] = []
    try:
        yield found
    finally:
        found.extend(SENT)
        SENT.clear()


def tracing_connection(dsn: str) -> psycopg.Connection[DictRow]:
    """A connection set up like the saver's pool connections, recording statements."""
    kwargs = {**SYNC_CONNECTION_KWARGS, "cursor_factory": TracingCursor}
    conn: psycopg.Connection[DictRow] = psycopg.Connection.connect(dsn, **kwargs)
    return conn


async def async_tracing_connection(dsn: str) -> psycopg.AsyncConnection[DictRow]:
    kwargs = {**ASYNC_CONNECTION_KWARGS, "cursor_factory": AsyncTracingCursor}
    conn: psycopg.AsyncConnection[DictRow] = await psycopg.AsyncConnection.connect(dsn, **kwargs)
    return conn


# ---------------------------------------------------------------------------------------
# Plans
# ---------------------------------------------------------------------------------------

PlanNode = dict[str, Any]


def walk(node: PlanNode) -> Iterator[PlanNode]:
    """Every node of a plan, including sub-plans and init-plans."""
    yield node
    for child in node.get("Plans", ()):
        yield from walk(child)


def outer_child(node: PlanNode) -> PlanNode:
    """The input of a node (not the sub-plans it evaluates)."""
    children = [c for c in node.get("Plans", ()) if c.get("Parent Relationship") == "Outer"]
    assert len(children) == 1, f"expected one outer child under {node['Node Type']}"
    child: PlanNode = children[0]
    return child


def outline(node: PlanNode, depth: int = 0) -> str:
    """A compact, readable rendering of a JSON plan for the test output."""
    label = node["Node Type"]
    if node.get("Scan Direction") == "Backward":
        label += " Backward"
    if "Relation Name" in node:
        label += f" on {node['Relation Name']}"
    if "Index Name" in node:
        label += f" using {node['Index Name']}"
    if "Sort Key" in node:
        label += f" by {', '.join(node['Sort Key'])}"
    if node.get("Parent Relationship") in ("SubPlan", "InitPlan"):
        label = f"[{node.get('Subplan Name', node['Parent Relationship'])}] {label}"
    label += f"  (rows={node.get('Plan Rows')}, cost={node.get('Total Cost')})"
    lines = ["  " * depth + label]
    lines.extend(outline(child, depth + 1) for child in node.get("Plans", ()))
    return "\n".join(lines)


def assert_no_seq_scan(plan: PlanNode, what: str) -> None:
    scans = [
        n["Relation Name"]
        for n in walk(plan)
        if n["Node Type"] == "Seq Scan" and n.get("Relation Name") in TABLES
    ]
    assert not scans, f"{what}: Seq Scan on {scans}\n{outline(plan)}"


def assert_limit_over_backward_index_scan(plan: PlanNode, what: str) -> None:
    """Limit over a backward scan of a checkpoints index, and no Sort anywhere."""
    shown = outline(plan)
    assert plan["Node Type"] == "Limit", f"{what}: top is not a Limit\n{shown}"
    scan = outer_child(plan)
    assert scan["Node Type"] in ("Index Scan", "Index Only Scan"), f"{what}\n{shown}"
    assert scan["Relation Name"] == "checkpoints", f"{what}\n{shown}"
    assert scan["Index Name"] in CHECKPOINT_INDEXES, f"{what}\n{shown}"
    assert scan["Scan Direction"] == "Backward", f"{what}\n{shown}"
    sorts = [n for n in walk(plan) if n["Node Type"] in ("Sort", "Incremental Sort")]
    assert not sorts, f"{what}: sorts the thread\n{shown}"


_NAMED = re.compile(r"%\((\w+)\)s")


def to_positional(query: str, params: Any) -> tuple[str, list[Any]]:
    """`%(name)s` / `%s` placeholders to `$n`, with the values in `$n` order."""
    if isinstance(params, dict):
        order: dict[str, int] = {}

        def number(match: re.Match[str]) -> str:
            name = match.group(1)
            if name not in order:
                order[name] = len(order) + 1
            return f"${order[name]}"

        text = _NAMED.sub(number, query)
        values = [params[name] for name in order]
    else:
        values = list(params or ())
        pieces = query.split("%s")
        assert len(pieces) == len(values) + 1
        text = pieces[0] + "".join(f"${i + 1}{p}" for i, p in enumerate(pieces[1:]))
    return text.replace("%%", "%"), values


MODES = ("custom", "generic")
_PLACEHOLDER = re.compile(r"\$\d+")


def explain(
    conn: psycopg.Connection[DictRow],
    sent: Sent,
    mode: str,
    *,
    analyze: bool = False,
    only_a_limit: bool = False,
) -> PlanNode:
    """EXPLAIN a recorded statement with its recorded parameters.

    `custom`: bound as psycopg sends it (binary), so the server plans for these values.
    `generic`: PREPAREd and EXECUTEd under `plan_cache_mode = force_generic_plan`, the plan
    a prepared statement gets once the server stops re-planning it. With `analyze`, the
    statement runs and the plan carries what the executor really read (row and buffer
    counts only: TIMING OFF, nothing here is a timer). `only_a_limit`: the statement's one
    parameter is its LIMIT, which a JSON plan does not show, so a generic plan cannot be
    told from a custom one by its `$n`.
    """
    options: LiteralString = (
        "ANALYZE, BUFFERS, TIMING OFF, SUMMARY OFF, FORMAT JSON" if analyze else "FORMAT JSON"
    )
    if mode == "custom":
        with conn.cursor(binary=True) as cur:
            cur.execute(f"EXPLAIN ({options}) ".encode() + sent.query.encode(), sent.params)
            row = cur.fetchone()
    else:
        assert mode == "generic"
        text, values = to_positional(sent.query, sent.params)
        conn.execute(b"PREPARE lgd_plan AS " + text.encode())
        try:
            conn.execute("SET plan_cache_mode = force_generic_plan")
            args = sql.SQL(", ").join(sql.Literal(v) for v in values)
            row = conn.execute(
                sql.SQL("EXPLAIN ({}) EXECUTE lgd_plan ({})").format(sql.SQL(options), args)
            ).fetchone()
        finally:
            conn.execute("RESET plan_cache_mode")
            conn.execute("DEALLOCATE lgd_plan")
    assert row is not None
    plan: PlanNode = row["QUERY PLAN"][0]["Plan"]
    if mode == "generic" and not only_a_limit:
        # A generic plan shows `$n` where a custom plan shows the value.
        assert _PLACEHOLDER.search(json.dumps(plan)), f"not a generic plan\n{outline(plan)}"
    return plan


def rows_read(plan: PlanNode) -> int:
    """Rows the executor took from the checkpoint tables (returned or filtered away)."""
    total = 0
    for node in walk(plan):
        if node.get("Relation Name") in TABLES:
            per_loop = node["Actual Rows"] + node.get("Rows Removed by Filter", 0)
            total += per_loop * node["Actual Loops"]
    return int(total)


def buffers_touched(plan: PlanNode) -> int:
    """Pages the statement touched (a node's counts include its children's). Unlike rows,
    this sees the index entries a scan steps over without returning them."""
    return int(plan.get("Shared Hit Blocks", 0) + plan.get("Shared Read Blocks", 0))


# ---------------------------------------------------------------------------------------
# The big table
# ---------------------------------------------------------------------------------------

BUILD_CHECKPOINTS = """
INSERT INTO checkpoints
    (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, checkpoint, metadata)
SELECT t.thread_id, t.ns, lpad(i::text, 20, '0'),
    CASE WHEN i > 1 THEN lpad((i - 1)::text, 20, '0') END,
    jsonb_build_object(
        'v', 4,
        'id', lpad(i::text, 20, '0'),
        'ts', to_char(timestamptz '2024-01-01 00:00:00+00' + i * interval '1 second',
                      'YYYY-MM-DD"T"HH24:MI:SS".000000+00:00"'),
        'channel_values', '{}'::jsonb,
        'channel_versions', jsonb_build_object(
            'messages', lpad(i::text, 32, '0') || '.0000000000000000',
            'delta', lpad(i::text, 32, '0') || '.0000000000000000',
            'full', lpad(i::text, 32, '0') || '.0000000000000000'),
        'versions_seen', '{}'::jsonb,
        'updated_channels', jsonb_build_array('messages', 'delta', 'full')),
    jsonb_build_object('source', 'loop', 'step', i, 'user', 'u' || (i %% 7), 'parents', '{}'::jsonb,
        'run_id', t.thread_id || '-run-' || (i / 1000))
FROM (VALUES
    (%(big)s, '', 1, %(n_big)s),
    (%(big)s, %(sub_ns)s, 1, %(n_sub)s),
    (%(tail)s, '', 1, %(n_tail_root)s),
    (%(tail)s, %(tail_ns)s, %(n_tail_root)s + 1, %(n_tail_root)s + %(n_tail_sub)s)
) AS t(thread_id, ns, first, last)
CROSS JOIN LATERAL generate_series(t.first, t.last) AS i
UNION ALL
SELECT 'small-' || k, '', lpad(i::text, 20, '0'),
    CASE WHEN i > 1 THEN lpad((i - 1)::text, 20, '0') END,
    jsonb_build_object(
        'v', 4, 'id', lpad(i::text, 20, '0'), 'ts', '2024-01-01T00:00:00.000000+00:00',
        'channel_values', '{}'::jsonb,
        'channel_versions', jsonb_build_object(
            'messages', lpad(i::text, 32, '0') || '.0000000000000000'),
        'versions_seen', '{}'::jsonb, 'updated_channels', jsonb_build_array('messages')),
    jsonb_build_object('source', 'loop', 'step', i, 'user', 'u' || (i %% 7), 'parents', '{}'::jsonb,
        'run_id', 'small-' || k || '-run-0')
FROM generate_series(1, %(n_small_threads)s) AS k, generate_series(1, %(n_small)s) AS i
"""

# Blobs in the serializer's real format: one per version of `messages`; for `delta`, like
# a DeltaChannel, a snapshot every 100 checkpoints only; `full` never has one, so its
# history goes back to the root.
BUILD_BLOBS = """
INSERT INTO checkpoint_blobs (thread_id, checkpoint_ns, channel, version, type, blob)
SELECT thread_id, checkpoint_ns, v.key, v.value, %(type)s, %(blob)s
FROM checkpoints
CROSS JOIN LATERAL jsonb_each_text(checkpoint -> 'channel_versions') AS v
WHERE v.key = 'messages' OR (v.key = 'delta' AND (checkpoint ->> 'id')::int %% 100 = 0)
"""

# Each checkpoint carries the writes of the step after it: one per channel. The thread that
# ends in a subgraph also waits at an interrupt at its latest root checkpoint, after an
# older, answered one; the big thread is a chat that asked a human every fourth step
# (5,000 answered interrupts, none waiting); every small thread asked once, at its first
# checkpoint, and was answered.
BUILD_WRITES = """
INSERT INTO checkpoint_writes
    (thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, idx, channel, type, blob)
SELECT c.thread_id, c.checkpoint_ns, c.checkpoint_id, 'task-' || c.checkpoint_id,
    '~__pregel_pull, agent', w.idx, w.channel, %(type)s, %(blob)s
FROM checkpoints c
CROSS JOIN (VALUES (0, 'messages'), (1, 'delta'), (2, 'full')) AS w(idx, channel)
UNION ALL
SELECT %(tail)s, '', lpad(i::text, 20, '0'), 'ask-' || i, '~__pregel_pull, ask', 0,
    '__interrupt__', %(type)s, %(blob)s
FROM unnest(ARRAY[%(n_tail_root)s / 2, %(n_tail_root)s]) AS i
UNION ALL
SELECT %(big)s, '', lpad(i::text, 20, '0'), 'ask-' || i, '~__pregel_pull, ask', 0,
    '__interrupt__', %(type)s, %(blob)s
FROM generate_series(1, %(n_big)s, 4) AS i
UNION ALL
SELECT 'small-' || k, '', lpad('1', 20, '0'), 'ask-1', '~__pregel_pull, ask', 0,
    '__interrupt__', %(type)s, %(blob)s
FROM generate_series(1, %(n_small_threads)s) AS k
"""


@pytest.fixture(scope="module")
def big_dsn(pg_server_dsn: str) -> Iterator[str]:
    """A database whose checkpoint tables are dominated by one 20,000-checkpoint thread."""
    name, dsn = create_database(pg_server_dsn)
    try:
        with DurablePostgresSaver.from_conn_string(dsn) as saver:
            saver.setup()
        type_, blob = JsonPlusSerializer().dumps_typed(["hi"])
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(
                BUILD_CHECKPOINTS,
                {
                    "big": BIG,
                    "sub_ns": SUB_NS,
                    "n_big": N_BIG,
                    "n_sub": N_SUB,
                    "tail": TAIL,
                    "tail_ns": TAIL_NS,
                    "n_tail_root": N_TAIL_ROOT,
                    "n_tail_sub": N_TAIL_SUB,
                    "n_small_threads": N_SMALL_THREADS,
                    "n_small": N_SMALL,
                },
            )
            conn.execute(BUILD_BLOBS, {"type": type_, "blob": blob})
            conn.execute(
                BUILD_WRITES,
                {
                    "type": type_,
                    "blob": blob,
                    "tail": TAIL,
                    "n_tail_root": N_TAIL_ROOT,
                    "big": BIG,
                    "n_big": N_BIG,
                    "n_small_threads": N_SMALL_THREADS,
                },
            )
            # Statistics from every row, not a sample: the same plans on every run.
            conn.execute("SET default_statistics_target = 1000")
            conn.execute("ANALYZE checkpoints, checkpoint_blobs, checkpoint_writes")
        yield dsn
    finally:
        drop_database(pg_server_dsn, name)


@pytest.fixture(scope="module")
def admin(big_dsn: str) -> Iterator[psycopg.Connection[DictRow]]:
    with psycopg.connect(
        big_dsn, autocommit=True, prepare_threshold=None, row_factory=dict_row
    ) as conn:
        # Only a guard against a hang: a plan that goes quadratic fails on its row count
        # (EXPLAIN ANALYZE), or here within a minute, never because the machine is slow.
        conn.execute("SET statement_timeout = '60s'")
        yield conn


# ---------------------------------------------------------------------------------------
# The reads, as the savers send them
# ---------------------------------------------------------------------------------------


def _cfg(**configurable: Any) -> RunnableConfig:
    return {"configurable": configurable}


LATEST = _cfg(thread_id=BIG, checkpoint_ns="")
LATEST_SUB = _cfg(thread_id=BIG, checkpoint_ns=SUB_NS)
LATEST_ROOT = _cfg(thread_id=TAIL, checkpoint_ns="")
# What get_state_history(snapshot.config) lists: one checkpoint, named in full.
NAMED = _cfg(thread_id=BIG, checkpoint_ns="", checkpoint_id=cid(10_000))
EXACT = _cfg(thread_id=BIG, checkpoint_ns="", checkpoint_id=cid(12_345))
THREAD = _cfg(thread_id=BIG)
THREAD_NS = _cfg(thread_id=BIG, checkpoint_ns="")
BEFORE = _cfg(thread_id=BIG, checkpoint_ns="", checkpoint_id=cid(10_000))
FILTER = {"user": "u3"}

# get_delta_channel_history finds its head first when the config names no checkpoint.
LATEST_READS = (
    "get_tuple_latest",
    "get_tuple_latest_sub",
    "get_tuple_latest_root",
    "delta_head_sub",
    "delta_head_root",
)
LISTS = ("list_limit", "list_before", "list_filter", "list_sub", "list_root")
READS = (*LATEST_READS, "get_tuple_exact", *LISTS, "list_named")


def _check_results(results: dict[str, Any]) -> None:
    """The reads return what the data says, so the SQL explained is the SQL that works."""
    latest = results["get_tuple_latest"]
    assert latest.config["configurable"]["checkpoint_id"] == cid(N_BIG)
    # 20,000 is a multiple of 100: `delta` has a snapshot blob there.
    assert latest.checkpoint["channel_values"] == {"messages": ["hi"], "delta": ["hi"]}
    assert [w[1] for w in latest.pending_writes] == ["messages", "delta", "full"]
    # A subgraph's latest, and the root's latest under 2,000 newer checkpoints of a subgraph.
    sub = results["get_tuple_latest_sub"]
    assert sub.config["configurable"]["checkpoint_id"] == cid(N_SUB)
    assert sub.config["configurable"]["checkpoint_ns"] == SUB_NS
    root = results["get_tuple_latest_root"]
    assert root.config["configurable"]["checkpoint_id"] == cid(N_TAIL_ROOT)
    assert root.config["configurable"]["checkpoint_ns"] == ""
    exact = results["get_tuple_exact"]
    assert exact.checkpoint["channel_values"] == {"messages": ["hi"]}
    assert results["get_tuple_exact"].config["configurable"]["checkpoint_id"] == cid(12_345)
    ids = [t.config["configurable"]["checkpoint_id"] for t in results["list_limit"]]
    assert ids == [cid(i) for i in range(N_BIG, N_BIG - 10, -1)]
    ids = [t.config["configurable"]["checkpoint_id"] for t in results["list_before"]]
    assert ids == [cid(i) for i in range(9_999, 9_989, -1)]
    found = results["list_filter"]
    assert len(found) == 5
    assert all(t.metadata["user"] == "u3" for t in found)
    assert found[0].config["configurable"]["checkpoint_id"] == cid(19_995)
    ids = [t.config["configurable"]["checkpoint_id"] for t in results["list_sub"]]
    assert ids == [cid(i) for i in range(N_SUB, N_SUB - 10, -1)]
    ids = [t.config["configurable"]["checkpoint_id"] for t in results["list_root"]]
    assert ids == [cid(i) for i in range(N_TAIL_ROOT, N_TAIL_ROOT - 10, -1)]
    ids = [t.config["configurable"]["checkpoint_id"] for t in results["list_named"]]
    assert ids == [cid(10_000)]


def _only(sent: Sequence[Sent], what: str) -> Sent:
    assert len(sent) == 1, f"{what} sent {len(sent)} statements: {[s.query for s in sent]}"
    return sent[0]


@pytest.fixture(scope="module")
def sent_by_sync(big_dsn: str) -> dict[str, Sent]:
    """The statement the sync saver sends for each read."""
    sent: dict[str, Sent] = {}
    results: dict[str, Any] = {}
    with tracing_connection(big_dsn) as conn:
        saver = DurablePostgresSaver(conn)
        with recording() as got:
            results["get_tuple_latest"] = saver.get_tuple(LATEST)
        sent["get_tuple_latest"] = _only(got, "get_tuple(latest)")
        with recording() as got:
            results["get_tuple_latest_sub"] = saver.get_tuple(LATEST_SUB)
        sent["get_tuple_latest_sub"] = _only(got, "get_tuple(latest, subgraph)")
        with recording() as got:
            results["get_tuple_latest_root"] = saver.get_tuple(LATEST_ROOT)
        sent["get_tuple_latest_root"] = _only(got, "get_tuple(latest, root)")
        for read, config in (("delta_head_sub", LATEST_SUB), ("delta_head_root", LATEST_ROOT)):
            with recording() as got:
                saver.get_delta_channel_history(config=config, channels=["messages"])
            assert got[0].query == QUERIES["latest_checkpoint_id"]
            sent[read] = got[0]
        with recording() as got:
            results["get_tuple_exact"] = saver.get_tuple(EXACT)
        sent["get_tuple_exact"] = _only(got, "get_tuple(exact)")
        with recording() as got:
            results["list_limit"] = list(saver.list(THREAD, limit=10))
        sent["list_limit"] = _only(got, "list(limit)")
        with recording() as got:
            results["list_before"] = list(saver.list(THREAD_NS, before=BEFORE, limit=10))
        sent["list_before"] = _only(got, "list(before)")
        with recording() as got:
            results["list_filter"] = list(saver.list(THREAD, filter=FILTER, limit=5))
        sent["list_filter"] = _only(got, "list(filter)")
        with recording() as got:
            results["list_sub"] = list(saver.list(LATEST_SUB, limit=10))
        sent["list_sub"] = _only(got, "list(subgraph)")
        with recording() as got:
            results["list_root"] = list(saver.list(LATEST_ROOT, limit=10))
        sent["list_root"] = _only(got, "list(root)")
        with recording() as got:
            results["list_named"] = list(saver.list(NAMED))
        sent["list_named"] = _only(got, "list(named)")
    _check_results(results)
    return sent


async def test_async_saver_sends_the_same_reads(
    big_dsn: str, sent_by_sync: dict[str, Sent]
) -> None:
    """The plans below hold for both classes: the async saver sends the same SQL."""
    results: dict[str, Any] = {}
    sent: dict[str, Sent] = {}
    conn = await async_tracing_connection(big_dsn)
    async with conn:
        saver = AsyncDurablePostgresSaver(conn)
        with recording() as got:
            results["get_tuple_latest"] = await saver.aget_tuple(LATEST)
        sent["get_tuple_latest"] = _only(got, "aget_tuple(latest)")
        with recording() as got:
            results["get_tuple_latest_sub"] = await saver.aget_tuple(LATEST_SUB)
        sent["get_tuple_latest_sub"] = _only(got, "aget_tuple(latest, subgraph)")
        with recording() as got:
            results["get_tuple_latest_root"] = await saver.aget_tuple(LATEST_ROOT)
        sent["get_tuple_latest_root"] = _only(got, "aget_tuple(latest, root)")
        for read, config in (("delta_head_sub", LATEST_SUB), ("delta_head_root", LATEST_ROOT)):
            with recording() as got:
                await saver.aget_delta_channel_history(config=config, channels=["messages"])
            assert got[0].query == QUERIES["latest_checkpoint_id"]
            sent[read] = got[0]
        with recording() as got:
            results["get_tuple_exact"] = await saver.aget_tuple(EXACT)
        sent["get_tuple_exact"] = _only(got, "aget_tuple(exact)")
        with recording() as got:
            results["list_limit"] = [t async for t in saver.alist(THREAD, limit=10)]
        sent["list_limit"] = _only(got, "alist(limit)")
        with recording() as got:
            results["list_before"] = [
                t async for t in saver.alist(THREAD_NS, before=BEFORE, limit=10)
            ]
        sent["list_before"] = _only(got, "alist(before)")
        with recording() as got:
            results["list_filter"] = [t async for t in saver.alist(THREAD, filter=FILTER, limit=5)]
        sent["list_filter"] = _only(got, "alist(filter)")
        with recording() as got:
            results["list_sub"] = [t async for t in saver.alist(LATEST_SUB, limit=10)]
        sent["list_sub"] = _only(got, "alist(subgraph)")
        with recording() as got:
            results["list_root"] = [t async for t in saver.alist(LATEST_ROOT, limit=10)]
        sent["list_root"] = _only(got, "alist(root)")
        with recording() as got:
            results["list_named"] = [t async for t in saver.alist(NAMED)]
        sent["list_named"] = _only(got, "alist(named)")
    _check_results(results)
    assert sent == sent_by_sync


# ---------------------------------------------------------------------------------------
# The plans
# ---------------------------------------------------------------------------------------


def _pairs(reads: Sequence[str]) -> list[tuple[str, str]]:
    """(read, mode) parameters: every read under both plans."""
    return [(read, mode) for read in reads for mode in MODES]


@pytest.mark.parametrize(("read", "mode"), _pairs(READS))
def test_no_seq_scan_on_the_big_table(
    admin: psycopg.Connection[DictRow], sent_by_sync: dict[str, Sent], read: str, mode: str
) -> None:
    skip_unless_prepared(sent_by_sync[read], mode)
    plan = explain(admin, sent_by_sync[read], mode)
    print(f"\n--- ours: {read} ({mode} plan)\n{outline(plan)}")
    assert_no_seq_scan(plan, f"{read} ({mode})")


# Regression test: with `checkpoint_ns = $2`, a generic plan walked the (thread, checkpoint)
# index and filtered the namespace: 19,507 rows for the subgraph's latest; and for the root
# under a long subgraph, custom plans too passed the subgraph's 2,000 checkpoints.
@pytest.mark.parametrize(("read", "mode"), _pairs(LATEST_READS))
def test_latest_checkpoint_is_one_backward_index_step(
    admin: psycopg.Connection[DictRow], sent_by_sync: dict[str, Sent], read: str, mode: str
) -> None:
    skip_unless_prepared(sent_by_sync[read], mode)
    plan = explain(admin, sent_by_sync[read], mode)
    assert_limit_over_backward_index_scan(plan, f"{read} ({mode})")
    # What the executor did, not only what it planned: one checkpoint row, not 20,000.
    analyzed = explain(admin, sent_by_sync[read], mode, analyze=True)
    scan = outer_child(analyzed)
    assert scan["Actual Rows"] == 1, outline(analyzed)
    assert scan.get("Rows Removed by Filter", 0) == 0, outline(analyzed)


@pytest.mark.parametrize("mode", MODES)
def test_exact_checkpoint_is_one_index_lookup(
    admin: psycopg.Connection[DictRow], sent_by_sync: dict[str, Sent], mode: str
) -> None:
    skip_unless_prepared(sent_by_sync["get_tuple_exact"], mode)
    plan = explain(admin, sent_by_sync["get_tuple_exact"], mode)
    scans = [n for n in walk(plan) if n.get("Relation Name") == "checkpoints"]
    assert len(scans) == 1, outline(plan)
    assert scans[0]["Node Type"] == "Index Scan", outline(plan)
    assert scans[0]["Index Name"] in CHECKPOINT_INDEXES, outline(plan)
    assert "Sort" not in {n["Node Type"] for n in walk(plan)}, outline(plan)


# Regression tests: a generic plan for list(filter=..., limit=) once sorted the whole thread,
# and one for a subgraph's namespace filtered it out of most of the thread. list() with a
# metadata filter is never prepared, so its generic case skips (see skip_unless_prepared).
@pytest.mark.parametrize(("read", "mode"), _pairs(LISTS))
def test_list_with_limit_is_a_limit_over_an_index_scan(
    admin: psycopg.Connection[DictRow], sent_by_sync: dict[str, Sent], read: str, mode: str
) -> None:
    skip_unless_prepared(sent_by_sync[read], mode)
    plan = explain(admin, sent_by_sync[read], mode)
    assert_limit_over_backward_index_scan(plan, f"{read} ({mode})")


# Regression test: joining jsonb_each_text(channel_versions) to checkpoint_blobs once
# hash-joined every blob of the thread (~20,500 rows per checkpoint returned).
@pytest.mark.parametrize(("read", "mode"), _pairs(READS))
def test_blobs_and_writes_are_primary_key_lookups(
    admin: psycopg.Connection[DictRow], sent_by_sync: dict[str, Sent], read: str, mode: str
) -> None:
    """A checkpoint's blobs and writes are found by key, never by scanning its thread."""
    skip_unless_prepared(sent_by_sync[read], mode)
    plan = explain(admin, sent_by_sync[read], mode)
    for node in walk(plan):
        table = node.get("Relation Name")
        if table in ("checkpoint_blobs", "checkpoint_writes"):
            assert node["Node Type"] == "Index Scan", outline(plan)
            assert node["Index Name"] == f"{table}_pkey", outline(plan)


# The second statement of a read whose blob was too large for the tuple's array: two
# blobs of the big thread, found by their primary key, whatever the thread's size.
LARGE_BLOBS = Sent(
    QUERIES["select_large_blobs"],
    {
        "thread_ids": [BIG, BIG],
        "checkpoint_nss": ["", ""],
        "channels": ["messages", "messages"],
        "versions": [f"{i:032d}.0000000000000000" for i in (N_BIG, 7)],
    },
)


@pytest.mark.parametrize("mode", MODES)
def test_large_blobs_are_fetched_by_key(admin: psycopg.Connection[DictRow], mode: str) -> None:
    # Its parameters all go to unnest(), which a JSON plan without VERBOSE does not show:
    # a generic plan cannot be told from a custom one by its `$n` (as with a LIMIT alone).
    plan = explain(admin, LARGE_BLOBS, mode, analyze=True, only_a_limit=True)
    shown = outline(plan)
    assert_no_seq_scan(plan, f"select_large_blobs ({mode})")
    scans = [n for n in walk(plan) if n.get("Relation Name") in TABLES]
    assert [n["Relation Name"] for n in scans] == ["checkpoint_blobs"], shown
    assert scans[0]["Node Type"] == "Index Scan", shown
    assert scans[0]["Index Name"] == "checkpoint_blobs_pkey", shown
    assert plan["Actual Rows"] == 2, shown
    assert rows_read(plan) <= 2, shown


# Upstream's single-column thread_id indexes are dropped (migration durable_008): every
# statement by thread alone, as upstream's delete_thread and ours send them, must still find
# a thread's rows through another index that starts with thread_id.
DELETES_BY_THREAD = {
    "ours, delete_threads": Sent(
        QUERIES["delete_threads"],
        {"thread_ids": ["small-7"], "idle_before": None, "all_or_none": True},
    ),
    "ours, delete_threads (retention)": Sent(
        QUERIES["delete_threads"],
        {"thread_ids": ["small-7"], "idle_before": "2000-01-01Z", "all_or_none": False},
    ),
    **{
        f"upstream's delete_thread, {table}": Sent(
            f"DELETE FROM {table} WHERE thread_id = %(thread_id)s", {"thread_id": "small-7"}
        )
        for table in sorted(TABLES)
    },
}


@pytest.mark.parametrize(("statement", "mode"), _pairs(list(DELETES_BY_THREAD)))
def test_deletes_by_thread_find_its_rows_by_index(
    admin: psycopg.Connection[DictRow], statement: str, mode: str
) -> None:
    plan = explain(admin, DELETES_BY_THREAD[statement], mode)  # EXPLAIN alone: nothing runs
    scanned = {n["Relation Name"] for n in walk(plan) if n.get("Relation Name") in TABLES}
    assert scanned, outline(plan)
    assert_no_seq_scan(plan, f"{statement} ({mode})")


# Rows a read may take from the tables: a few per checkpoint it returns (the row, its
# blobs, its writes) plus, for a filtered list, the rows the filter skips on the way.
READ_BUDGET = {
    "get_tuple_latest": 10,
    "get_tuple_latest_sub": 10,
    "get_tuple_latest_root": 10,
    "delta_head_sub": 10,
    "delta_head_root": 10,
    "get_tuple_exact": 10,
    "list_limit": 100,
    "list_before": 100,
    "list_filter": 150,
    "list_sub": 100,
    "list_root": 100,
    "list_named": 10,
}


# Pages a read may touch: a page or two for each row above, and the index pages on the way.
# Index entries a scan steps over without returning them show here, not in the rows: a
# namespace matched as a range before a named checkpoint stepped over the rest of the
# namespace (91 pages for `list_named` under a generic plan, against 18).
BUFFER_BUDGET = {
    **dict.fromkeys(LATEST_READS, 30),
    "get_tuple_exact": 30,
    "list_named": 30,
    **dict.fromkeys(LISTS, 200),
}


# Regression test for the blob join, the generic-plan sort and the named list above.
@pytest.mark.parametrize(("read", "mode"), _pairs(READS))
def test_reads_touch_only_the_rows_they_return(
    admin: psycopg.Connection[DictRow], sent_by_sync: dict[str, Sent], read: str, mode: str
) -> None:
    """EXPLAIN ANALYZE row counts: the cost of a read does not grow with its thread."""
    skip_unless_prepared(sent_by_sync[read], mode)
    plan = explain(admin, sent_by_sync[read], mode, analyze=True)
    found = rows_read(plan)
    print(f"\n{read} ({mode}): {found} rows read, {buffers_touched(plan)} buffers")
    assert found <= READ_BUDGET[read], f"{read} ({mode}) read {found} rows\n{outline(plan)}"
    pages = buffers_touched(plan)
    assert pages <= BUFFER_BUDGET[read], f"{read} ({mode}) touched {pages} pages\n{outline(plan)}"


# ---------------------------------------------------------------------------------------
# The package's other reads of a thread's latest root checkpoint
# ---------------------------------------------------------------------------------------

# Sent as written in queries.sql by the run registry (`run_latest_checkpoint`: on every
# claim and requeue), the approvals queue and the registry (`pending_interrupts`, of one
# thread or all) and the console (`console_thread_checkpoints`). Each once stepped over
# the subgraph's 2,000 newer checkpoints, or read a whole thread.
ROOT_READS: dict[str, tuple[LiteralString, dict[str, Any]]] = {
    "run_latest_tail": (
        QUERIES["run_latest_checkpoint"],
        {"run_id": f"{TAIL}-run-0", "thread_id": TAIL},
    ),
    "run_latest_big": (
        QUERIES["run_latest_checkpoint"],
        {"run_id": f"{BIG}-run-{N_BIG // 1000}", "thread_id": BIG},
    ),
    "run_older_big": (
        QUERIES["run_latest_checkpoint"],
        {"run_id": f"{BIG}-run-5", "thread_id": BIG},
    ),
    "pending_interrupts_thread": (
        QUERIES["pending_interrupts_thread"],
        {"thread_id": TAIL, "limit": 1},
    ),
    "pending_interrupts_answered": (
        QUERIES["pending_interrupts_thread"],
        {"thread_id": BIG, "limit": 1},
    ),
    "pending_interrupts_all": (QUERIES["pending_interrupts"], {"limit": 10_000}),
    "console_checkpoints": (
        QUERIES["console_thread_checkpoints"],
        {"thread_id": TAIL, "limit": 10},
    ),
    "console_checkpoint": (QUERIES["console_thread_checkpoints"], {"thread_id": TAIL, "limit": 1}),
}
ROOT_EXPECTED = {
    "run_latest_tail": [cid(N_TAIL_ROOT)],
    "run_latest_big": [cid(N_BIG)],
    "run_older_big": [cid(5_999)],
    "pending_interrupts_thread": [cid(N_TAIL_ROOT)],
    "pending_interrupts_answered": [],
    # The answered interrupt at the older checkpoint is not waiting any more.
    "pending_interrupts_all": [cid(N_TAIL_ROOT)],
    "console_checkpoints": [cid(i) for i in range(N_TAIL_ROOT - 9, N_TAIL_ROOT + 1)],
    "console_checkpoint": [cid(N_TAIL_ROOT)],
}
# A run's latest checkpoint costs the run's checkpoints (in the data: up to 1,000 a run,
# its subgraph's included), never the thread's.
ASKING_THREADS = 2 + N_SMALL_THREADS  # threads with interrupts at a root checkpoint
ROOT_BUDGET = {  # (rows, pages)
    "run_latest_tail": (5, 10),
    "run_latest_big": (5, 10),
    "run_older_big": (1_010, 100),
    "pending_interrupts_thread": (10, 20),
    "pending_interrupts_answered": (10, 20),
    # Each thread that ever asked costs two steps (the next thread with the newest
    # checkpoint where it asked, then its latest root checkpoint), however many questions
    # it asked (BIG asked 5,001: checking each against its thread's latest checkpoint
    # touched 20,121 pages); only a waiting thread's interrupts are read. Joining every
    # asking thread's latest checkpoint before looking for interrupts there read 3 rows
    # and 12 pages per thread.
    "pending_interrupts_all": (3 * ASKING_THREADS, 9 * ASKING_THREADS),
    "console_checkpoints": (20, 30),
    "console_checkpoint": (5, 10),
}


@pytest.mark.parametrize(("read", "mode"), _pairs(list(ROOT_READS)))
def test_other_root_reads_do_not_pass_a_subgraph(
    admin: psycopg.Connection[DictRow], read: str, mode: str
) -> None:
    query, params = ROOT_READS[read]
    sent = Sent(query, params)
    with admin.cursor(binary=True) as cur:
        found = [row["checkpoint_id"] for row in cur.execute(query, params).fetchall()]
    assert found == ROOT_EXPECTED[read]
    plan = explain(admin, sent, mode, analyze=True, only_a_limit=list(params) == ["limit"])
    rows, pages = rows_read(plan), buffers_touched(plan)
    print(f"\n{read} ({mode}): {rows} rows read, {pages} buffers\n{outline(plan)}")
    assert_no_seq_scan(plan, f"{read} ({mode})")
    max_rows, max_pages = ROOT_BUDGET[read]
    assert rows <= max_rows, f"{read} ({mode}) read {rows} rows\n{outline(plan)}"
    assert pages <= max_pages, f"{read} ({mode}) touched {pages} pages\n{outline(plan)}"


@pytest.fixture(scope="module")
def sent_by_upstream(big_dsn: str) -> dict[str, Sent]:
    """The statement upstream's `PostgresSaver` sends for the same reads."""
    sent: dict[str, Sent] = {}
    with tracing_connection(big_dsn) as conn:
        upstream = PostgresSaver(conn)
        with recording() as got:
            assert upstream.get_tuple(LATEST) is not None
        sent["get_tuple_latest"] = got[-1]
        with recording() as got:
            assert len(list(upstream.list(THREAD, limit=10))) == 10
        sent["list_limit"] = got[-1]
    return sent


# The control for the budgets above: upstream's SQL for the same reads, captured and
# explained the same way, reads rows in proportion to the thread (its blob join takes
# every blob of the thread for each checkpoint returned), on our schema and on its own.
# Were our reads like that, their budgets would catch it; were this data too small to
# tell, this test would say so.
@pytest.mark.parametrize("schema", ["ours", "upstream's own"])
@pytest.mark.parametrize("read", ["get_tuple_latest", "list_limit"])
def test_upstream_reads_grow_with_the_thread_where_ours_do_not(
    admin: psycopg.Connection[DictRow],
    sent_by_sync: dict[str, Sent],
    sent_by_upstream: dict[str, Sent],
    read: str,
    schema: str,
) -> None:
    ours = {
        mode: rows_read(explain(admin, sent_by_sync[read], mode, analyze=True))
        for mode in MODES
        if mode == "custom" or sent_by_sync[read].may_get_a_generic_plan
    }
    assert all(found <= READ_BUDGET[read] for found in ours.values()), ours
    with admin.transaction(force_rollback=True):
        if schema == "upstream's own":  # it lacks our (thread_id, checkpoint_id) index
            admin.execute("DROP INDEX lgd_checkpoints_thread_id_checkpoint_id_idx")
            admin.execute("DROP INDEX lgd_checkpoints_run_id_idx")
        for mode in MODES:
            plan = explain(admin, sent_by_upstream[read], mode, analyze=True)
            theirs = rows_read(plan)
            assert theirs >= N_BIG, f"upstream {read} ({mode}) read {theirs}\n{outline(plan)}"


def test_the_savers_own_pool_prepares_its_reads(big_dsn: str) -> None:
    """Why generic plans matter: the saver's pool prepares statements (prepare_threshold=0),
    and after five executions the server may plan a prepared read once, for any thread."""
    with DurablePostgresSaver.from_conn_string(big_dsn, max_connections=1) as saver:
        for _ in range(12):
            saver.get_tuple(LATEST)
            list(saver.list(THREAD, limit=5))
            list(saver.list(THREAD, filter=FILTER, limit=5))
            list(saver.list(THREAD_NS, limit=5))
        pool = saver.conn
        assert isinstance(pool, ConnectionPool)
        with pool.connection() as conn:
            rows = conn.execute(
                # Every tuple statement has a LIMIT 1 inside (a blob lookup): get_tuple's
                # ends with one, list()'s with its own limit.
                "SELECT generic_plans, custom_plans, statement ~ 'LIMIT 1\\s*$' AS latest, "
                "statement ~ 'LIMIT \\$[0-9]+\\s*$' AS listed, "
                "statement LIKE '%%@>%%' AS filtered, "
                "statement LIKE '%%c.checkpoint_ns >= $%%' AS namespaced "
                "FROM pg_prepared_statements "
                "WHERE statement LIKE '%%FROM checkpoints c%%' AND statement NOT LIKE '%%pg_prep%%'"
            ).fetchall()
    print(f"\nprepared tuple statements: {rows}")
    # get_tuple(latest) and list() with or without a namespace are prepared and reused;
    # list() with a metadata filter never is (the generic-plan tests above skip it): a
    # generic plan sorts a whole huge thread.
    assert any(row["latest"] for row in rows)
    assert any(row["listed"] and not row["namespaced"] for row in rows)
    assert any(row["listed"] and row["namespaced"] for row in rows)
    assert not any(row["listed"] and row["filtered"] for row in rows)
    for row in rows:
        assert row["generic_plans"] + row["custom_plans"] == 12


# ---------------------------------------------------------------------------------------
# get_delta_channel_history
# ---------------------------------------------------------------------------------------


# `full` has no stored value anywhere: its walk goes all 20,000 checkpoints back. `delta`
# has a snapshot every 100 checkpoints: its walk from the head stops 100 back, and must
# cost 100 checkpoints' worth of reads however big the thread is.
WALKS = {"full": N_BIG, "delta": 100}


@pytest.fixture(scope="module")
def delta_sent(big_dsn: str) -> dict[str, Sent]:
    sent: dict[str, Sent] = {}
    head = _cfg(thread_id=BIG, checkpoint_ns="", checkpoint_id=cid(N_BIG))
    with tracing_connection(big_dsn) as conn:
        saver = DurablePostgresSaver(conn)
        for channel, depth in WALKS.items():
            with recording() as got:
                history = saver.get_delta_channel_history(config=head, channels=[channel])
            sent[channel] = _only(got, f"get_delta_channel_history({channel})")
            # The head's own writes are pending for the next step, so they are left out;
            # the writes stored against the snapshot checkpoint are applied after it.
            writes = history[channel]["writes"]
            assert len(writes) == depth - 1 if channel == "full" else depth
            assert [w[0] for w in writes[-2:]] == [
                "task-" + cid(N_BIG - 2),
                "task-" + cid(N_BIG - 1),
            ]
            assert ("seed" in history[channel]) == (channel == "delta")
    return sent


# Regression test: under a generic plan the recursive walk once joined all the thread's
# checkpoints (and writes) at every step: quadratic in the depth.
@pytest.mark.parametrize(("read", "mode"), _pairs(list(WALKS)))
def test_delta_history_costs_its_depth_not_its_thread(
    admin: psycopg.Connection[DictRow], delta_sent: dict[str, Sent], read: str, mode: str
) -> None:
    """One statement whose reads grow with the depth walked, not with the thread."""
    statement = delta_sent[read]
    skip_unless_prepared(statement, mode)
    plan = explain(admin, statement, mode)
    print(f"\n--- ours: delta_history {read} ({mode} plan)\n{outline(plan)}")
    assert_no_seq_scan(plan, f"delta_history {read} ({mode})")
    found = rows_read(explain(admin, statement, mode, analyze=True))
    # Per checkpoint walked: the row, the blob probe, its writes (3 channels), the seed probe.
    budget = 8 * WALKS[read] + 20
    assert found <= budget, f"delta_history {read} ({mode}) read {found} rows\n{outline(plan)}"


# ---------------------------------------------------------------------------------------
# A real graph with DeltaChannels, 2,000 steps deep
# ---------------------------------------------------------------------------------------

DEPTH = 2_000


def extend(state: list[int], writes: Sequence[list[int]]) -> list[int]:
    """Deterministic and batching-invariant, as DeltaChannel requires."""
    return [*state, *(x for batch in writes for x in batch)]


class DeltaState(TypedDict):
    # Never snapshots within the run: rebuilt from the whole chain back to the root.
    full: Annotated[list[int], DeltaChannel(extend, snapshot_frequency=1_000_000)]
    # Snapshots every 300 updates: rebuilt from the nearest snapshot.
    snapped: Annotated[list[int], DeltaChannel(extend, snapshot_frequency=300)]
    steps: int


class SnapState(TypedDict):
    snapped: Annotated[list[int], DeltaChannel(extend, snapshot_frequency=300)]
    other: Annotated[list[int], DeltaChannel(extend, snapshot_frequency=130)]
    steps: int


def _looping_graph(state: type[Any], channels: Sequence[str], stop: int) -> Any:
    def step(state: Any) -> dict[str, Any]:
        n = state.get("steps", 0)
        return {**{ch: [n] for ch in channels}, "steps": n + 1}

    def route(state: Any) -> str:
        return END if state["steps"] >= stop else "step"

    builder = StateGraph(state)
    builder.add_node("step", step)
    builder.add_edge(START, "step")
    builder.add_conditional_edges("step", route)
    return builder


def _history(
    saver: BaseCheckpointSaver[Any], config: RunnableConfig, channels: Sequence[str]
) -> dict[str, Any]:
    return dict(saver.get_delta_channel_history(config=config, channels=channels))


def _base_history(
    saver: BaseCheckpointSaver[Any], config: RunnableConfig, channels: Sequence[str]
) -> dict[str, Any]:
    """The base class's reference walk: get_tuple after get_tuple up the parent chain."""
    return dict(
        BaseCheckpointSaver.get_delta_channel_history(saver, config=config, channels=channels)
    )


def _count(conn: psycopg.Connection[DictRow], thread_id: str) -> int:
    row = conn.execute(
        "SELECT count(*) AS n FROM checkpoints WHERE thread_id = %s", [thread_id]
    ).fetchone()
    assert row is not None
    return int(row["n"])


@pytest.fixture(scope="module")
def delta_dsn(pg_server_dsn: str) -> Iterator[str]:
    name, dsn = create_database(pg_server_dsn)
    try:
        with DurablePostgresSaver.from_conn_string(dsn) as saver:
            saver.setup()
        yield dsn
    finally:
        drop_database(pg_server_dsn, name)


@pytest.fixture(scope="module")
def deep_thread(delta_dsn: str) -> RunnableConfig:
    """A thread 2,000 steps deep, written by the sync saver through a real graph."""
    config: RunnableConfig = {"configurable": {"thread_id": "deep"}, "recursion_limit": DEPTH + 10}
    with DurablePostgresSaver.from_conn_string(delta_dsn) as saver:
        graph = _looping_graph(DeltaState, ["full", "snapped"], DEPTH).compile(checkpointer=saver)
        graph.invoke({"full": [], "snapped": [], "steps": 0}, config, durability="sync")
        state = graph.get_state(config)
    assert state.values["full"] == list(range(DEPTH))
    assert state.values["snapped"] == list(range(DEPTH))
    return config


def test_delta_history_is_one_statement_and_matches_the_base_walk(
    delta_dsn: str, deep_thread: RunnableConfig
) -> None:
    channels = ["full", "snapped"]
    with tracing_connection(delta_dsn) as conn:
        saver = DurablePostgresSaver(conn)
        head = saver.get_tuple(deep_thread)
        assert head is not None
        assert _count(conn, "deep") > DEPTH
        with recording() as got:
            ours = _history(saver, head.config, channels)
        statement = _only(got, "get_delta_channel_history")
        assert "WITH RECURSIVE" in statement.query
        reference = _base_history(saver, head.config, channels)
    assert ours == reference
    # The whole chain back to the input for `full`; back to a snapshot for `snapped`.
    assert len(ours["full"]["writes"]) >= DEPTH - 1
    assert "seed" in ours["snapped"]
    assert len(ours["snapped"]["writes"]) < 300


async def test_async_delta_history_matches_the_base_walk(
    delta_dsn: str, deep_thread: RunnableConfig
) -> None:
    channels = ["full", "snapped"]
    conn = await async_tracing_connection(delta_dsn)
    async with conn:
        saver = AsyncDurablePostgresSaver(conn)
        head = await saver.aget_tuple(deep_thread)
        assert head is not None
        # Somewhere in the middle too, where neither channel is at a snapshot.
        middle = _cfg(thread_id="deep", checkpoint_ns="", checkpoint_id=head.checkpoint["id"])
        async for older in saver.alist(deep_thread, before=head.config, limit=1_037):
            middle = older.config
        for config in (head.config, middle):
            with recording() as got:
                ours = await saver.aget_delta_channel_history(config=config, channels=channels)
            _only(got, "aget_delta_channel_history")
            reference = await BaseCheckpointSaver.aget_delta_channel_history(
                saver, config=config, channels=channels
            )
            assert dict(ours) == dict(reference)


def test_delta_history_in_the_middle_of_the_chain(
    delta_dsn: str, deep_thread: RunnableConfig
) -> None:
    channels = ["full", "snapped"]
    with DurablePostgresSaver.from_conn_string(delta_dsn) as saver:
        ids = [t.config for t in saver.list(deep_thread)]
        for config in (ids[len(ids) // 2], ids[len(ids) - 5], ids[-1]):
            assert _history(saver, config, channels) == _base_history(saver, config, channels)


def test_prune_keeps_a_deep_delta_thread_rebuildable(
    delta_dsn: str, deep_thread: RunnableConfig
) -> None:
    """`full` never snapshots, so keep_latest must keep the whole chain: nothing is lost."""
    with DurablePostgresSaver.from_conn_string(delta_dsn) as saver:
        graph = _looping_graph(DeltaState, ["full", "snapped"], DEPTH).compile(checkpointer=saver)
        saver.copy_thread("deep", "deep-copy")
        copy_config: RunnableConfig = {"configurable": {"thread_id": "deep-copy"}}
        before = graph.get_state(copy_config).values
        with psycopg.connect(delta_dsn, row_factory=dict_row) as conn:
            before_rows = _count(conn, "deep-copy")
        saver.prune(["deep-copy"], strategy="keep_latest")
        after = graph.get_state(copy_config).values
        with psycopg.connect(delta_dsn, row_factory=dict_row) as conn:
            after_rows = _count(conn, "deep-copy")
    assert before["full"] == list(range(DEPTH))
    assert after == before
    assert after_rows == before_rows


def test_prune_cuts_a_snapshotting_delta_thread_and_keeps_it_rebuildable(
    delta_dsn: str,
) -> None:
    steps = 1_000
    config: RunnableConfig = {"configurable": {"thread_id": "snap"}, "recursion_limit": steps + 10}
    with DurablePostgresSaver.from_conn_string(delta_dsn) as saver:
        graph = _looping_graph(SnapState, ["snapped", "other"], steps).compile(checkpointer=saver)
        graph.invoke({"snapped": [], "other": [], "steps": 0}, config, durability="sync")
        before = graph.get_state(config).values
        with psycopg.connect(delta_dsn, row_factory=dict_row) as conn:
            before_rows = _count(conn, "snap")
        saver.prune(["snap"], strategy="keep_latest")
        after = graph.get_state(config).values
        with psycopg.connect(delta_dsn, row_factory=dict_row) as conn:
            after_rows = _count(conn, "snap")
        assert after == before
        assert before["snapped"] == list(range(steps))
        # Back to the older of the two latest snapshots, not the whole chain.
        assert after_rows < 320, (before_rows, after_rows)
        # The pruned thread still runs on from where it was.
        graph.invoke({"steps": steps}, config, durability="sync")
        resumed = graph.get_state(config).values
    assert resumed["snapped"] == [*range(steps), steps]
