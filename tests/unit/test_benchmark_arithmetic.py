"""The arithmetic of the benchmark tools' CPU splits, on numbers made up here: a tool that
swapped ours and the no-op saver, or divided by the wrong count, would fail here (their
integration runs only check that they run)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from async_cpu_by_level import Sample, table
from bench_async import AsyncResult
from bench_report import _cpu_split
from profile_step import SAVER_PARTS, TOP, _saver_share, group_samples


def test_the_report_splits_ours_cpu_per_step_over_the_no_op_saver_round_by_round() -> None:
    ours = AsyncResult(
        steps_per_s=[1000.0, 1200.0, 1500.0], p99_ms=[0.0] * 3, cpu_ms_per_step=[1.0, 0.5, 0.6]
    )
    noop = AsyncResult(steps_per_s=[3000.0] * 3, p99_ms=[0.0] * 3, cpu_ms_per_step=[0.3, 0.3, 0.1])
    notes = _cpu_split(ours, noop)
    assert "LangGraph's own (the no-op saver's) 0.30 ms" in notes
    # Round by round: 0.7, 0.2 and 0.5 (the medians' difference would be 0.6 - 0.3).
    assert "over the no-op saver 0.50" in notes
    # Each round's CPU use: 1.0, 0.6 and 0.9 (the medians' product would be 0.72).
    assert "ours keeps 0.90 cores busy" in notes


def test_profile_step_gives_each_savers_cpu_over_the_no_op_checkpointer() -> None:
    costs = {
        "LangGraph with a no-op checkpointer": (9.0, 0.3, 0.1),
        "upstream PostgresSaver": (9.0, 0.9, 0.3),
        "DurablePostgresSaver": (9.0, 0.8, 0.2),
    }
    assert "ours 0.600 ms, upstream 0.800 ms (0.75x)" in _saver_share(costs)


def test_the_level_table_pairs_ours_and_the_no_op_saver_turn_by_turn() -> None:
    found = {
        ("ours", 16): [Sample(1.0, 1000.0), Sample(1.2, 600.0), Sample(1.3, 800.0)],
        ("noop", 16): [Sample(0.5, 2000.0), Sample(0.9, 1000.0), Sample(0.6, 1500.0)],
        ("ours", 256): [Sample(1.4, 700.0)] * 3,
        ("noop", 256): [Sample(0.6, 1600.0)] * 3,
    }
    rows = table(found, (16, 256)).splitlines()
    # Over the no-op saver per turn: 0.5, 0.3 and 0.7, median 0.5 (the medians' difference
    # would be 1.2 - 0.6). Cores busy: 1.0, 0.72 and 1.04 (not 1.2 x 800 / 1000).
    assert rows[2] == (
        "| 16 | 1.200 (1.000-1.300) | 0.600 (0.500-0.900) | 0.500 (0.300-0.700) "
        "| 800 (600-1,000) | 1.000 (0.720-1.040) |"
    )
    assert rows[3] == (
        "| 256 | 1.400 (1.400-1.400) | 0.600 (0.600-0.600) | 0.800 (0.800-0.800) "
        "| 700 (700-700) | 0.980 (0.980-0.980) |"
    )


# Frames as py-spy --format raw writes them, from a real profile of the sync loop.
_PUT = (
    "Thread._bootstrap (threading.py:1002);_worker (concurrent/futures/thread.py:83);"
    "_WorkItem.run (concurrent/futures/thread.py:58);"
    "SyncPregelLoop._checkpointer_put_after_previous (pregel/_loop.py:1761);"
    "DurablePostgresSaver.put (langgraph_durable/checkpoint/_saver.py:520);"
    "retry_on_disconnect.<locals>.wrapper (langgraph_durable/_db/_source.py:326);"
    "DurablePostgresSaver._store_checkpoint (langgraph_durable/checkpoint/_saver.py:531)"
)


def test_py_spy_groups_find_the_saver_s_statement_and_pool() -> None:
    stacks = [
        f"{_PUT};Cursor.execute (psycopg/cursor.py:113);"
        "Connection.wait (psycopg/connection.py:495) 5",
        f"{_PUT};_GeneratorContextManager.__enter__ (contextlib.py:137);"
        "ConnectionSource.connection (langgraph_durable/_db/_source.py:214);"
        "ConnectionSource._borrow (langgraph_durable/_db/_source.py:261);"
        "ConnectionPool.getconn (psycopg_pool/pool.py:214) 2",
        f"{_PUT};ConnectionSource._give_back (langgraph_durable/_db/_source.py:270);"
        "ConnectionPool.putconn (psycopg_pool/pool.py:340) 1",
        # Both execute frames on one stack (conn.execute calls Cursor.execute): counted once.
        f"{_PUT};Connection.execute (psycopg/connection.py:280);"
        "Cursor.execute (psycopg/cursor.py:113) 4",
        # A statement outside our saver (upstream's, or the caller's own) is not the saver's.
        "_worker (concurrent/futures/thread.py:83);Cursor.execute (psycopg/cursor.py:113) 7",
        "<module> (site.py:1);_find_and_load (<frozen importlib._bootstrap>:1) 50",
    ]
    groups, total = group_samples(stacks)
    saver, execute, pool = TOP[0][0], SAVER_PARTS[0][0], SAVER_PARTS[1][0]
    assert total == 19  # start-up samples are left out
    assert (groups[saver], groups[execute], groups[pool]) == (12, 9, 3)
