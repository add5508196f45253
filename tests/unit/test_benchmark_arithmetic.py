"""The arithmetic of the benchmark tools' CPU splits, on numbers made up here: a tool that
swapped ours and the no-op saver, or divided by the wrong count, would fail here (their
integration runs only check that they run)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from async_cpu_by_level import Sample, table
from bench_async import AsyncResult
from bench_common import SERVER_GC_THRESHOLDS, Cost, Stats, gc_thresholds
from bench_processes import ProcessesResult
from bench_report import (
    Results,
    _cpu_split,
    async_flat_why,
    async_rate_why,
    effect_why,
    floor_why,
    gc_label,
    gc_note,
    large_why,
    markdown,
    processes_why,
    step_why,
    targets,
    throughput_why,
)
from profile_effect import report as effect_report
from profile_step import SAVER_PARTS, TOP, _saver_share, group_samples
from run import load_results

ROOT = Path(__file__).resolve().parents[2]


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


def _one(value: float) -> Stats:
    return Stats.of([value])


def test_a_per_step_reason_splits_the_goal_between_the_statement_and_the_rest() -> None:
    steps = {
        ("ours", "sync"): _one(1.0),
        ("upstream_single", "sync"): _one(1.2),
        ("upstream_pool", "sync"): _one(1.5),
        ("statement_only", "sync"): _one(0.9),
    }
    why = step_why(steps, "sync", 0.8)
    # Against the faster setup (1.2): the goal is 0.96, the statement 0.9 leaves 0.06.
    assert "against 1.200 for upstream's one connection" in why
    assert "the goal is at most 0.960 ms" in why
    assert "takes 0.900 ms (0.75x), which leaves 0.060 ms" in why
    assert "that takes 0.100 ms" in why
    assert why.endswith("`python benchmarks/profile_step.py --durability sync`.")
    steps[("statement_only", "sync")] = _one(1.0)
    assert "no saver that sends this statement per step can meet the goal" in step_why(
        steps, "sync", 0.8
    )


def test_throughput_reasons_count_steps_not_invokes() -> None:
    tput = {
        ("ours", 16): _one(80.0),
        ("upstream_single", 16): _one(64.0),
        ("upstream_pool", 16): _one(60.0),
        ("noop", 16): _one(166.0),
    }
    why = throughput_why(tput, 16, 1.3)
    assert why.startswith("ours 800 steps/s against 640 for upstream's one connection")
    assert "the goal needs 832" in why
    assert "reaches 1,660 at 16 threads" in why


def test_the_async_reason_gives_the_cpu_per_step_the_goal_allows() -> None:
    found = {
        ("ours", 64): AsyncResult([1000.0, 900.0, 1100.0], [0.0] * 3, [0.9, 1.0, 0.8]),
        ("upstream_single", 64): AsyncResult([700.0] * 3, [0.0] * 3, [1.4] * 3),
        ("upstream_pool", 64): AsyncResult([600.0] * 3, [0.0] * 3, [1.6] * 3),
        ("noop", 64): AsyncResult([3000.0] * 3, [0.0] * 3, [0.1, 0.5, 0.3]),
    }
    why = async_rate_why(found, 64, 2.0)
    # Cores busy per round: 0.9, 0.9 and 0.88 (median 0.9); 1,400 steps/s at 0.9 cores
    # allow 0.643 ms per step. Over the no-op saver round by round: 0.8, 0.5 and 0.5, so
    # 0.5 (the medians' difference would be 0.9 - 0.3).
    assert why.startswith("ours 1,000 steps/s against 700 for upstream's one connection")
    assert "the goal needs 1,400. Ours keeps 0.90 cores busy" in why
    assert "0.90 ms, where the goal allows 0.64" in why
    assert "is 0.30 ms per step, which leaves 0.34 ms" in why
    assert "ours takes 0.50 over the no-op saver" in why
    # The report's row note says the same number.
    assert "over the no-op saver 0.50" in _cpu_split(found[("ours", 64)], found[("noop", 64)])
    found[("ours", 64)] = AsyncResult([500.0] * 3, [0.0] * 3, [1.0] * 3)
    assert "Ours keeps 0.50 cores busy: it waits part of the time" in async_rate_why(found, 64, 2.0)


def test_the_flatness_reason_sets_ours_against_langgraph_alone() -> None:
    found = {
        ("ours", 16): AsyncResult([1000.0] * 3, [0.0] * 3, [0.9, 1.0, 1.1]),
        ("ours", 256): AsyncResult([800.0] * 3, [0.0] * 3, [1.2, 1.1, 1.3]),
        ("noop", 16): AsyncResult([3000.0] * 3, [0.0] * 3, [0.1, 0.5, 0.3]),
        ("noop", 256): AsyncResult([2700.0] * 3, [0.0] * 3, [0.4, 0.3, 0.4]),
    }
    why = async_flat_why(found)
    assert why.startswith("ours' rate at 256 runs is 0.80x its rate at 16")
    assert "the no-op saver, which stores nothing, 0.90x" in why
    assert "from 1.00 to 1.20 ms, the no-op saver's from 0.30 to 0.40" in why
    # Over the no-op saver round by round: 0.8 at 16 runs (0.8, 0.5, 0.8) and 0.8 at 256
    # (0.8, 0.8, 0.9); the medians' differences would say 0.7 and 0.8.
    assert "changes by +0.00 ms" in why
    assert why.endswith("`python benchmarks/async_cpu_by_level.py --levels 16,256`.")


def test_the_gc_note_gives_the_tuned_rates_against_upstreams_best_at_each_level() -> None:
    tuned = {
        ("ours", 16): AsyncResult([1200.0, 1100.0], [0.0] * 2, [0.8] * 2),
        ("ours", 256): AsyncResult([1800.0, 1600.0], [0.0] * 2, [0.6] * 2),
        ("upstream_single", 16): AsyncResult([600.0] * 2, [0.0] * 2, [1.6] * 2),
        ("upstream_pool", 16): AsyncResult([500.0] * 2, [0.0] * 2, [1.7] * 2),
        ("upstream_single", 256): AsyncResult([400.0] * 2, [0.0] * 2, [2.0] * 2),
        ("upstream_pool", 256): AsyncResult([425.0] * 2, [0.0] * 2, [2.0] * 2),
        ("noop", 16): AsyncResult([2000.0] * 2, [0.0] * 2, [0.4] * 2),
        ("noop", 256): AsyncResult([2200.0] * 2, [0.0] * 2, [0.4] * 2),
    }
    setting = gc_label({"async_gc_thresholds": (50000, 50, 100)})
    assert setting == "GC thresholds 50,000/50/100"
    note = gc_note(tuned, setting)
    # Medians: ours 1,150 and 1,700; upstream's best 600 (one connection) at 16 runs and
    # 425 (its pool) at 256.
    assert note.startswith(" Under GC thresholds 50,000/50/100 (the README's setting")
    assert "ours made 16 runs 1,150 steps/s (1.92x), 256 runs 1,700 steps/s (4.00x)" in note
    assert "its rate at 256 runs is 1.48x its rate at 16, the no-op saver's 1.10x." in note
    assert gc_note(None, setting) == ""
    del tuned[("upstream_pool", 256)], tuned[("upstream_single", 256)]
    note = gc_note(tuned, setting)  # a level without upstream is left out, not the note
    assert "ours made 16 runs 1,150 steps/s (1.92x) of upstream's best;" in note
    assert "its rate at 256 runs is 1.48x its rate at 16" in note
    assert gc_label({}) == "GC thresholds not recorded"


def test_gc_thresholds_are_set_for_the_block_and_set_back() -> None:
    import gc

    before = gc.get_threshold()
    with gc_thresholds(SERVER_GC_THRESHOLDS):
        assert gc.get_threshold() == SERVER_GC_THRESHOLDS
    assert gc.get_threshold() == before
    with gc_thresholds(None):
        assert gc.get_threshold() == before


def test_the_tuned_async_targets_are_reported_beside_the_default_ones() -> None:
    saved = json.loads((ROOT / "docs" / "benchmarks.json").read_text(encoding="utf-8"))
    saved["settings"]["async_gc_thresholds"] = [50000, 50, 100]
    saved["async_gc"] = saved["async"]  # the same numbers, as if measured under the setting
    results = load_results(saved)
    assert results.async_gc == results.async_runs
    by_name = {t.name: t for t in targets(results)}
    default = by_name["async: ours at 256 concurrent runs vs ours at 16"]
    tuned = by_name["async, recommended GC setting: ours at 256 concurrent runs vs ours at 16"]
    assert tuned.measured == default.measured
    mid = "async, 64 concurrent runs on one loop"
    assert by_name[f"{mid}, recommended GC setting: steps/s vs upstream's best"].measured == (
        by_name[f"{mid}: steps/s vs upstream's best"].measured
    )
    if default.passed is False:
        assert "Under GC thresholds 50,000/50/100" in default.why
    text = markdown(results)
    assert "| async, 64 concurrent runs on one event loop, GC thresholds 50,000/50/100 |" in text
    del saved["async_gc"]
    by_name = {t.name: t for t in targets(load_results(saved))}
    assert by_name[f"{mid}, recommended GC setting: steps/s vs upstream's best"].measured is None


def test_the_processes_reason_compares_ours_with_upstreams_faster_setup() -> None:
    found = {
        ("ours", 4): ProcessesResult([1000.0, 1100.0], [0.25, 0.21], [40.0, 38.0]),
        ("upstream_single", 4): ProcessesResult([800.0, 850.0], [0.2, 0.2], [30.0, 32.0]),
        ("upstream_pool", 4): ProcessesResult([900.0, 950.0], [0.18, 0.19], [35.0, 35.0]),
        ("noop", 4): ProcessesResult([4000.0, 4200.0], [0.0, 0.0], [10.0, 10.0]),
    }
    why = processes_why(found, 4, 1.3)
    assert why.startswith("ours 1,050 steps/s against 925 for upstream's pool")
    assert "the goal needs 1,202" in why
    assert "23% of the machine's CPU with ours, 18% with upstream's" in why
    assert "39 times per step with ours, 35 with upstream's" in why
    assert "the no-op checkpointer reaches 4,100" in why


def test_per_step_targets_against_the_drop_in_floor_say_what_the_goal_leaves() -> None:
    steps = {
        ("ours", "sync"): _one(1.2),
        ("statement_only", "sync"): _one(1.0),
        ("upstream_single", "sync"): _one(1.6),
    }
    why = floor_why(steps, "sync", 1.05)
    assert why.startswith("ours 1.200 ms per step against 1.000 for a saver that only sends")
    assert "the goal is at most 1.050 ms, which leaves 0.050 ms per step" in why
    assert "ours takes 0.200" in why
    assert "profile_step.py --durability sync" in why
    saved = json.loads((ROOT / "docs" / "benchmarks.json").read_text(encoding="utf-8"))
    by_name = {t.name: t for t in targets(load_results(saved))}
    for mode in ("sync", "async"):
        target = by_name[f"{mode} per-step time vs the drop-in floor (our put statement alone)"]
        ours, floor = (saved["steps"][f"{name}|{mode}"] for name in ("ours", "statement_only"))
        assert target.measured == ours["median"] / floor["median"]
        assert target.goal == 1.05
        assert target.at_most


def test_async_worker_processes_get_rows_a_target_and_a_reason_of_their_own() -> None:
    saved = json.loads((ROOT / "docs" / "benchmarks.json").read_text(encoding="utf-8"))
    saved["settings"]["process_async_runs"] = 64
    saved["processes_async"] = {
        f"{name}|{level}": {"steps_per_s": [rate * level], "server_share": [0.2]}
        for level in (1, 4)
        for name, rate in (
            ("ours", 1200.0),
            ("upstream_single", 500.0),
            ("upstream_pool", 400.0),
            ("noop", 3000.0),
        )
    }
    results = load_results(saved)
    text = markdown(results)
    assert (
        "| 4 worker processes on one Postgres, 64 async runs on one event loop each, total "
        "| steps/s | 4,800 | 2,000 | one connection (from_conn_string) | 2.40x |"
    ) in text
    assert "64 async runs on one event loop per process, pools of 4" in text
    name = (
        "4 worker processes on one Postgres, 64 async runs on one event loop each: total "
        "steps/s vs upstream's best"
    )
    by_name = {t.name: t for t in targets(results)}
    assert by_name[name].measured == 2.4
    assert by_name[name].passed is True
    # The threads target is still the `processes` scenario's, not this one's.
    threads = by_name["4 worker processes on one Postgres: total steps/s vs upstream's best"]
    assert threads.measured != 2.4
    why = processes_why(results.processes_async or {}, 4, 1.3, "async")
    assert "--processes 4 --mode async`" in why
    assert "--pools" not in why
    assert "async_cpu_by_level.py" in why
    del saved["processes_async"]
    assert {t.name: t for t in targets(load_results(saved))}[name].measured is None


def test_the_effect_reason_leaves_the_python_what_the_statements_do_not_use() -> None:
    fx = {
        "effect": _one(0.9),
        "two_commits": _one(0.6),
        "statements": _one(0.72),
        "one_commit": _one(0.3),
    }
    why = effect_why(fx, 1.3)
    assert "the goal is at most 0.780" in why
    assert "take 0.720 ms (1.20x" in why
    assert "which leaves 0.060 ms" in why
    assert "that takes 0.180 ms" in why


def test_the_large_value_reason_names_the_worst_call() -> None:
    large = {
        ("ours", "write", 1000): _one(0.46),
        ("upstream_single", "write", 1000): _one(0.40),
        ("upstream_pool", "write", 1000): _one(0.37),
        ("ours", "read", 1000): _one(0.30),
        ("upstream_single", "read", 1000): _one(0.31),
        ("upstream_pool", "read", 1000): _one(0.35),
        ("ours", "write", 1000000): _one(5.0),
        ("upstream_single", "write", 1000000): _one(4.5),
        ("upstream_pool", "write", 1000000): _one(4.6),
    }
    why = large_why(large)
    assert why.startswith(
        "the worst is the 1 KB put: ours 0.460 ms against 0.370 for upstream's pool"
    )
    assert "90 us more per call" in why
    assert "`python benchmarks/bench_large.py --sizes 1000 --profile`" in why


def test_a_chats_rows_are_shown_beside_the_large_values_outside_their_target() -> None:
    large = {
        (saver, op, size): _one(value)
        for saver, op, size, value in [
            ("ours", "write", 1000, 0.46),
            ("upstream_single", "write", 1000, 0.40),
            ("upstream_pool", "write", 1000, 0.45),
            ("ours", "read", 1000, 0.30),
            ("upstream_single", "read", 1000, 0.31),
            ("upstream_pool", "read", 1000, 0.35),
            ("ours", "chat_write", 400, 4.0),
            ("upstream_single", "chat_write", 400, 8.0),
            ("upstream_pool", "chat_write", 400, 8.5),
            ("ours", "chat_read", 400, 9.0),
            ("upstream_single", "chat_read", 400, 6.0),
            ("upstream_pool", "chat_read", 400, 7.0),
        ]
    }
    text = markdown(Results(machine={}, settings={"read_sizes": (100,)}, large=large))
    assert "| chat of 400 messages: put | ms | 4.000 " in text
    assert "| chat of 400 messages: get_tuple | ms | 9.000 " in text
    assert "| 1.50x |" in text  # the chat's read: shown, though the target leaves it out
    found = targets(Results(machine={}, settings={"read_sizes": (100,)}, large=large))
    [target] = [t for t in found if t.name.startswith("large values")]
    assert target.measured == pytest.approx(0.46 / 0.40)
    assert large_why(large).startswith("the worst is the 1 KB put")


def test_the_report_explains_failing_targets_only() -> None:
    failing = Results(
        machine={},
        settings={"read_sizes": (100,)},
        effects={
            "effect": _one(0.9),
            "two_commits": _one(0.6),
            "statements": _one(0.72),
            "one_commit": _one(0.3),
        },
    )
    text = markdown(failing)
    assert "Why each failing target misses" in text
    assert "- @effect overhead vs the two-commit floor: an @effect call takes 0.900 ms" in text
    passing = Results(
        machine={},
        settings={"read_sizes": (100,)},
        effects={
            "effect": _one(0.7),
            "two_commits": _one(0.6),
            "statements": _one(0.65),
            "one_commit": _one(0.3),
        },
    )
    assert "Why each failing target misses" not in markdown(passing)


def test_the_effect_profile_subtracts_each_layer_from_the_one_above() -> None:
    costs = {
        "effect": Cost(wall=1.0, client=0.3, server=0.35, calls=1000),
        "journal": Cost(wall=0.9, client=0.24, server=0.36, calls=1000),
        "statements": Cost(wall=0.88, client=0.22, server=0.35, calls=1000),
        "two_commits": Cost(wall=0.66, client=0.16, server=0.25, calls=1000),
        "in_memory": Cost(wall=0.03, client=0.03, server=0.0, calls=1000),
        "journal_then_in_memory": Cost(wall=1.0, client=0.33, server=0.36, calls=1000),
    }
    lines = effect_report(costs).splitlines()
    assert "| @effect call | 1000 | 300 | 350 | 350 |" in lines
    assert any(
        line.startswith("Against the floor (660 µs): @effect 1.52x (a ratio of means")
        for line in lines
    )
    assert "| the journal's statements over two plain inserts | +220 | +60 | +100 |" in lines
    assert (
        "Python between round trips: the @effect call on an in-memory journal takes 30 µs of "
        "client CPU alone and adds 90 µs after the journal's two statements (3.0x)." in lines
    )


def test_every_failing_target_of_the_committed_run_says_why() -> None:
    saved = json.loads((ROOT / "docs" / "benchmarks.json").read_text(encoding="utf-8"))
    failing = [t for t in targets(load_results(saved)) if t.passed is False]
    assert failing, "the committed run should have failing targets to explain"
    assert [t.name for t in failing if not t.why] == []


def test_reasons_for_the_branches_that_say_the_goal_is_out_of_reach_or_omit_data() -> None:
    fx = {"effect": _one(0.9), "two_commits": _one(0.6), "statements": _one(0.8)}
    assert "no Python around them can meet the goal" in effect_why(fx, 1.3)
    found = {
        ("ours", 4): ProcessesResult([1000.0], [0.2]),
        ("upstream_single", 4): ProcessesResult([800.0], [0.2]),
        ("noop", 4): ProcessesResult([4000.0], [0.0]),
    }
    assert "switched context" not in processes_why(found, 4, 1.3)


def test_a_run_without_the_no_op_saver_is_reported_without_its_reasons() -> None:
    saved = json.loads((ROOT / "docs" / "benchmarks.json").read_text(encoding="utf-8"))
    # Runs before the no-op saver was measured on the loop had only these keys.
    saved["async"] = {k: v for k, v in saved["async"].items() if not k.startswith("noop|")}
    results = load_results(saved)
    assert results.async_runs is not None
    assert all(name != "noop" for name, _ in results.async_runs)
    by_name = {t.name: t for t in targets(results)}
    flat = by_name["async: ours at 256 concurrent runs vs ours at 16"]
    assert flat.measured is not None
    assert flat.why == ""
    assert "Why each failing target misses" in markdown(results)
