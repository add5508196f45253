"""Every benchmark scenario, ours against upstream's PostgresSaver, in one process and run.

    python benchmarks/run.py [--dsn DSN] [--quick] [--out DIR] [--only SCENARIO,...]
    python benchmarks/run.py --report-only [--out DIR]

Scenarios (see each module's docstring for the method):

- steps:      ms per step of a 10-node, 10-channel graph in each durability mode, the
              graph alone and on a no-op checkpointer (`bench_steps.py`, the graph of
              `durability_modes.py`);
- throughput: steps/s with 1, 4 and 16 concurrent threads, sync savers, pools of 4;
- async:      steps/s and p99 step latency with 16, 64 and 256 concurrent runs on one
              event loop, async savers with 4 connections (`bench_async.py`);
- async_gc:   the same with the collector's thresholds at the README's setting for many
              runs on one loop (`SERVER_GC_THRESHOLDS`), every saver alike;
- large:      `put` and `get_tuple` of a 1 KB, 1 MB and 50 MB channel value, and of a
              400-message chat (`bench_large.py`);
- reads:      latest `get_tuple` and `list(limit=10)` on threads of 100, 10,000 and 100,000
              bulk-loaded checkpoints next to 2,000 short threads (`bench_data.py`);
- storage:    table bytes per step of a 200-turn chat, each saver in its own database;
- effects:    an `@effect` call against two single-row INSERT+commit statements, and the
              raw one-commit floor (`bench_effects.py`);
- processes:  total steps/s of 1, 2 and 4 worker processes with 16 threads each on one
              Postgres, and the server's CPU share (`bench_processes.py`);
- processes_async: the same with 64 concurrent async runs on one event loop per process,
              async savers;
- runs:       the run registry with worker processes: time from a SIGKILL to the run's next
              checkpoint in another worker, against the lease; commits and ms per run with
              1, 4 and 16 workers against direct invokes (`bench_runs.py`).

Prints a markdown table with ratios (ours / upstream's faster setup in the same run) and the
machine, checks the targets of issue 16 and says why each failing one misses (from the same
run's numbers, with the command that profiles it), and writes `benchmarks.md`,
`benchmarks.json` and (with matplotlib, the `bench` extra) `benchmarks.png` into `--out`
(default `docs/`). In
`benchmarks.md` only the part between the result markers is replaced, so hand-written
sections around it survive.
`--only` re-runs some scenarios and keeps the others from the previous `benchmarks.json`;
`--report-only` rewrites the table and the plot from it.

Where the time of a step goes: `profile_step.py [--durability sync|async|exit]`; of an
`@effect` call, layer by layer down to two plain commits: `profile_effect.py`; commit-mode
what-ifs and single statement costs: `what_if.py`; what one round trip costs on this
machine, by the CPU its backend runs on: `round_trips.py`; the server's CPU per step, ours
against upstream: `server_cpu.py`.

`--dsn` names the server (any database on it): every scenario runs in scratch databases
created there and dropped afterwards. Without it, `LANGGRAPH_DURABLE_DSN`, else an embedded
Postgres.
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import Any

from bench_async import AsyncResult, async_concurrency
from bench_common import (
    POOL_SIZE,
    ROOT,
    SERVER_GC_THRESHOLDS,
    Stats,
    machine,
    scratch_database,
)
from bench_data import ReadResults, StorageResult, reads, storage
from bench_effects import effects
from bench_large import large_values
from bench_processes import ProcessesResult, processes_benchmark
from bench_report import Results, markdown, plot, targets
from bench_runs import RunsResults, runs_benchmark
from bench_steps import per_step, throughput

from langgraph_durable.embedded import resolve_dsn

SCENARIOS = (
    "steps",
    "throughput",
    "async",
    "async_gc",
    "large",
    "reads",
    "storage",
    "effects",
    "processes",
    "processes_async",
    "runs",
)

FULL: dict[str, Any] = {
    "step_runs": 200,
    "step_warmup": 3,
    "levels": (1, 4, 16),
    "throughput_seconds": 1.5,
    "throughput_rounds": 6,
    "async_levels": (16, 64, 256),
    "async_seconds": 3.0,
    "async_rounds": 3,
    "async_gc_rounds": 3,
    "async_gc_thresholds": SERVER_GC_THRESHOLDS,
    "large_sizes": (1_000, 1_000_000, 50_000_000),
    "large_messages": (400,),
    # 5, not 3: the 50 MB put read 1.20x from three samples in one run and 1.00x from five
    # interleaved samples right after; a median of three moves with two slow samples.
    "large_reps": 5,
    "read_sizes": (100, 10_000, 100_000),
    "read_background": (2_000, 5),
    "read_reps": 60,
    "read_warmup": 3,
    "turns": 200,
    "effect_reps": 1000,
    "effect_warmup": 20,
    "process_levels": (1, 2, 4),
    "process_threads": 16,
    "process_seconds": 5.0,
    "process_rounds": 2,
    "process_async_runs": 64,
    "pool_size": POOL_SIZE,
    "recovery_plan": ((2.0, 12), (5.0, 4)),
    "recovery_workers": 3,
    "recovery_nodes": 20,
    "recovery_node_ms": 100.0,
    "runs_levels": (1, 4, 16),
    "runs_count": 96,
    "runs_rounds": 3,
}
QUICK: dict[str, Any] = {
    "step_runs": 3,
    "step_warmup": 1,
    "levels": (1, 4, 16),
    "throughput_seconds": 0.4,
    "throughput_rounds": 1,
    "async_levels": (2, 8),
    "async_seconds": 0.3,
    "async_rounds": 1,
    "async_gc_rounds": 1,
    "async_gc_thresholds": SERVER_GC_THRESHOLDS,
    "large_sizes": (1_000, 100_000),
    "large_messages": (20,),
    "large_reps": 1,
    "read_sizes": (100, 1_000),
    "read_background": (200, 5),
    "read_reps": 5,
    "read_warmup": 2,
    "turns": 20,
    "effect_reps": 20,
    "effect_warmup": 3,
    "process_levels": (1,),
    "process_threads": 2,
    "process_seconds": 0.5,
    "process_rounds": 1,
    "process_async_runs": 4,
    "pool_size": POOL_SIZE,
    "recovery_plan": ((1.0, 1),),
    "recovery_workers": 2,
    "recovery_nodes": 8,
    "recovery_node_ms": 50.0,
    "runs_levels": (1,),
    "runs_count": 4,
    "runs_rounds": 1,
}

START_MARK = (
    "<!-- results: written by benchmarks/run.py; everything up to the end mark is replaced -->"
)
END_MARK = "<!-- end of results -->"

HEADER = """# Benchmarks

Ours (`DurablePostgresSaver`, `AsyncDurablePostgresSaver`) against upstream's `PostgresSaver`
and `AsyncPostgresSaver` (langgraph-checkpoint-postgres) in both of its setups, one connection
(`from_conn_string`, as its README shows) and a pool, measured in the same process and run;
every ratio is against the faster of the two for that row, and the table names which one
won. Reproduce with one command (about 25 minutes on 2 cores; `--quick` takes a minute and
only checks that it all runs):

```bash
pip install -e '.[bench]' && python benchmarks/run.py --dsn postgresql://postgres@127.0.0.1:5432/postgres
```
"""

METHOD = """How each scenario is measured (details in the docstrings of `benchmarks/bench_*.py`):

- per step: a 10-node linear graph with 10 channels (`benchmarks/durability_modes.py`) is
  invoked on a fresh thread; invoke time / 10. All savers and modes are interleaved in a
  shuffled order in every repetition. Each saver writes to a database of its own schema.
  The no-op checkpointer stores nothing: it is LangGraph's own checkpointing work. The
  one-commit saver stores nothing either but commits one single-row INSERT per checkpoint:
  the floor for any saver that makes each step durable before the next one starts. The
  statement-only saver runs our real put statement with a real step's parameters computed
  once, in every mode: the floor for a drop-in saver (the targets' last column).
- throughput: N Python threads each invoke that graph back to back on their own thread ids
  (`durability="sync"`), one saver at a time with a pool of 4; completed steps per second
  over a fixed window after a ramp-up, median of rounds. The no-op checkpointer at the same
  thread counts is the ceiling for any saver in one Python process.
- async: N coroutines on one event loop each run that graph back to back on their own
  thread ids (`astream(stream_mode="updates")`, i.e. `ainvoke` with a timestamp per step,
  `durability="sync"`); every saver has 4 connections (ours and upstream's
  `AsyncPostgresSaver` on an `AsyncConnectionPool`; upstream's `from_conn_string` has one);
  completed steps per second over a window after a ramp-up, and the 99th percentile of the
  time between a run's consecutive steps; median over rounds, savers alternating. A no-op
  saver on the same loop is the ceiling for any saver there.
- async_gc: the async scenario again (`async_gc_rounds` rounds), with Python's collector
  thresholds set to `gc.set_threshold(50_000, 50, 100)`, the README's setting for many runs
  on one loop; every saver runs under it alike.
- large: one checkpoint holding a dict with 1 KB, 1 MB or 50 MB of seeded text (stored as
  a blob) is `put` on a new thread and read back with `get_tuple`; interleaved. The same
  for a list of 400 chat messages (human and AI, with ids, response metadata and token
  usage, `bench_large.chat`): what a chat agent's every turn reads back, each message a
  custom value to build.
- reads: three threads plus 2,000 short ones, bulk-loaded with COPY in the savers' shared
  row format (a chat loop: a `messages` blob per checkpoint and the next task's writes), so
  the tables are dominated by the biggest thread while the average thread is small;
  `get_tuple({"thread_id": t})` and `list({"thread_id": t}, limit=10)`. Upstream runs on the
  schema its own `setup()` makes, ours on a copy of that database after our `setup()`; the
  note "upstream on our migrated schema" is upstream on that copy. All interleaved.
- storage: a chat thread (`add_messages`, seeded text of varied length) run turn by turn
  with `durability="sync"`, each saver in its own database; growth of
  `pg_total_relation_size` of the three tables (indexes and TOAST included) / checkpoints.
  The DeltaChannel row runs the same chat with `messages` in LangGraph's `DeltaChannel`
  (the recommended setting, which the storage target uses); the pglz row runs ours with
  the value columns' TOAST compression set back from lz4 (our `setup()`) to Postgres'
  default pglz.
- effects: an `@effect` with a no-op body on a new business key (journal claim + complete,
  two synchronous commits) against two single-row INSERT+commit statements on the same
  pool, interleaved; the journal's two statements alone, with precomputed parameters, are
  the floor for any `@effect` on this journal.
- processes: P worker processes, each with 16 threads invoking the 10-node graph back to
  back (`durability="sync"`), one saver at a time (ours and upstream's pool with 4
  connections per process, upstream's `from_conn_string` with one); steps finished per
  second by all processes over the same window (each step counted as its update streams
  in), once every thread of every process has finished one run, median of rounds, savers
  alternating; the server's CPU share is the local `postgres` processes' CPU time over the
  window / (window x cores). A no-op saver in as many processes is the ceiling on this
  machine.
- processes_async: the same, each process running 64 `ainvoke` runs back to back on one
  event loop (as an async agent server does) with the async savers of the async scenario,
  under Python's default collector thresholds.
- runs: worker processes (`Worker`, default `idle_wait`) take runs of a linear graph whose
  nodes sleep; the busy one is SIGKILLed a few steps in, and the run's row is read every
  5 ms until another worker has claimed it and committed its next checkpoint. Cost: N runs
  of the 10-node graph through the registry (created here, then W worker processes started
  on the queue) against the same N invokes split over W processes with the same saver;
  commits are `pg_stat_database.xact_commit` deltas of the scratch database.
"""


def _parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--dsn", help="any database on the server to benchmark on")
    parser.add_argument("--quick", action="store_true", help="tiny sizes: checks that it runs")
    parser.add_argument("--out", type=Path, default=ROOT / "docs", help="where to write")
    parser.add_argument(
        "--report-only",
        action="store_true",
        help="run nothing: rewrite the table and plot from the benchmarks.json in --out",
    )
    parser.add_argument(
        "--only",
        help=f"comma-separated scenarios to run ({', '.join(SCENARIOS)}); the others are "
        "taken from the previous benchmarks.json in --out",
    )
    return parser.parse_args()


@contextmanager
def _two_databases(server_dsn: str, tag: str) -> Iterator[tuple[str, str]]:
    """Scratch databases for upstream and for ours (each saver on its own schema)."""
    with (
        scratch_database(server_dsn, f"{tag}_upstream") as upstream_dsn,
        scratch_database(server_dsn, f"{tag}_ours") as ours_dsn,
    ):
        yield upstream_dsn, ours_dsn


def _run(results: Results, server_dsn: str, chosen: tuple[str, ...]) -> None:
    s = results.settings
    for scenario in chosen:
        began = time.perf_counter()
        print(f"running {scenario} ...", file=sys.stderr, flush=True)
        if scenario == "steps":
            with _two_databases(server_dsn, "steps") as (upstream_dsn, ours_dsn):
                results.steps = per_step(upstream_dsn, ours_dsn, s["step_runs"], s["step_warmup"])
        elif scenario == "throughput":
            with _two_databases(server_dsn, "tput") as (upstream_dsn, ours_dsn):
                results.throughput = throughput(
                    upstream_dsn,
                    ours_dsn,
                    s["levels"],
                    s["throughput_seconds"],
                    s["throughput_rounds"],
                )
        elif scenario in ("async", "async_gc"):
            tuned = scenario == "async_gc"  # the README's collector setting, else the process's
            with _two_databases(server_dsn, scenario) as (upstream_dsn, ours_dsn):
                found = async_concurrency(
                    upstream_dsn,
                    ours_dsn,
                    tuple(s["async_levels"]),
                    s["async_seconds"],
                    s["async_gc_rounds" if tuned else "async_rounds"],
                    gc_setting=tuple(s["async_gc_thresholds"]) if tuned else None,
                )
            if tuned:
                results.async_gc = found
            else:
                results.async_runs = found
        elif scenario == "large":
            with _two_databases(server_dsn, "large") as (upstream_dsn, ours_dsn):
                results.large = large_values(
                    upstream_dsn,
                    ours_dsn,
                    tuple(s["large_sizes"]),
                    s["large_reps"],
                    tuple(s.get("large_messages", ())),
                )
        elif scenario == "reads":
            results.reads = reads(
                server_dsn, s["read_sizes"], s["read_background"], s["read_reps"], s["read_warmup"]
            )
        elif scenario == "storage":
            results.storage = storage(server_dsn, s["turns"])
        elif scenario == "effects":
            with scratch_database(server_dsn, "effects") as dsn:
                results.effects = effects(dsn, s["effect_reps"], s["effect_warmup"])
        elif scenario in ("processes", "processes_async"):
            mode = "async" if scenario == "processes_async" else "threads"
            with _two_databases(server_dsn, scenario) as (upstream_dsn, ours_dsn):
                found_processes = processes_benchmark(
                    upstream_dsn,
                    ours_dsn,
                    tuple(s["process_levels"]),
                    s["process_async_runs" if mode == "async" else "process_threads"],
                    s["process_seconds"],
                    s["process_rounds"],
                    mode=mode,
                )
            if mode == "async":
                results.processes_async = found_processes
            else:
                results.processes = found_processes
        elif scenario == "runs":
            results.runs = runs_benchmark(
                server_dsn,
                scratch_database,
                recovery_plan=tuple(tuple(p) for p in s["recovery_plan"]),
                workers=s["recovery_workers"],
                nodes=s["recovery_nodes"],
                node_ms=s["recovery_node_ms"],
                levels=tuple(s["runs_levels"]),
                runs=s["runs_count"],
                rounds=s["runs_rounds"],
            )
        results.seconds[scenario] = time.perf_counter() - began
        if scenario == "reads" and results.reads is not None:
            results.seconds["of which bulk load"] = results.reads.load_seconds


# ---------------------------------------------------------------------------------------
# benchmarks.json: the raw results, so that --only can re-run part of them


def _key(key: Any) -> str:
    return "|".join(str(k) for k in key) if isinstance(key, tuple) else str(key)


def _stats(table: dict[Any, Stats] | None) -> dict[str, Any] | None:
    return None if table is None else {_key(k): asdict(v) for k, v in table.items()}


def _to_json(results: Results) -> dict[str, Any]:
    return {
        "machine": results.machine,
        "settings": results.settings,
        "seconds": results.seconds,
        "steps": _stats(results.steps),
        "throughput": _stats(results.throughput),
        "async": None
        if results.async_runs is None
        else {_key(k): asdict(v) for k, v in results.async_runs.items()},
        "async_gc": None
        if results.async_gc is None
        else {_key(k): asdict(v) for k, v in results.async_gc.items()},
        "large": _stats(results.large),
        "reads": None
        if results.reads is None
        else {"stats": _stats(results.reads.stats), "load_seconds": results.reads.load_seconds},
        "storage": None
        if results.storage is None
        else {k: asdict(v) for k, v in results.storage.items()},
        "effects": _stats(results.effects),
        "processes": None
        if results.processes is None
        else {_key(k): asdict(v) for k, v in results.processes.items()},
        "processes_async": None
        if results.processes_async is None
        else {_key(k): asdict(v) for k, v in results.processes_async.items()},
        "runs": None if results.runs is None else asdict(results.runs),
    }


def _restore(previous: dict[str, Any], results: Results, scenario: str) -> None:
    def stats(table: dict[str, Any], convert: Any = None) -> dict[Any, Stats]:
        out: dict[Any, Stats] = {}
        for key, value in table.items():
            parts = key.split("|")
            out[convert(parts) if convert else key] = Stats(**value)
        return out

    data = previous.get(scenario)
    if data is None:
        return
    if scenario == "steps":
        results.steps = stats(data, lambda p: (p[0], p[1]))
    elif scenario == "throughput":
        results.throughput = stats(data, lambda p: (p[0], int(p[1])))
    elif scenario in ("async", "async_gc"):
        found = {(k.split("|")[0], int(k.split("|")[1])): AsyncResult(**v) for k, v in data.items()}
        if scenario == "async":
            results.async_runs = found
        else:
            results.async_gc = found
    elif scenario == "large":
        results.large = stats(data, lambda p: (p[0], p[1], int(p[2])))
    elif scenario == "reads":
        results.reads = ReadResults(
            stats(data["stats"], lambda p: (p[0], p[1], int(p[2]))), data["load_seconds"]
        )
    elif scenario == "storage":
        results.storage = {k: StorageResult(**v) for k, v in data.items()}
    elif scenario == "effects":
        results.effects = stats(data)
    elif scenario in ("processes", "processes_async"):
        found_processes = {
            (k.split("|")[0], int(k.split("|")[1])): ProcessesResult(**v) for k, v in data.items()
        }
        if scenario == "processes":
            results.processes = found_processes
        else:
            results.processes_async = found_processes
    elif scenario == "runs":
        results.runs = RunsResults(**data)
    if scenario in previous.get("seconds", {}):
        results.seconds[scenario] = previous["seconds"][scenario]
    if scenario == "reads" and results.reads is not None:
        results.seconds["of which bulk load"] = results.reads.load_seconds


def _write_markdown(path: Path, body: str) -> None:
    generated = f"{START_MARK}\n\n{body}\n\n{METHOD}\n{END_MARK}"
    if path.exists():
        old = path.read_text(encoding="utf-8")
        if START_MARK in old and END_MARK in old:
            before, rest = old.split(START_MARK, 1)
            after = rest.split(END_MARK, 1)[1]
            path.write_text(before + generated + after, encoding="utf-8")
            return
    path.write_text(f"{HEADER}\n{generated}\n", encoding="utf-8")


def load_results(saved: dict[str, Any]) -> Results:
    """The results of a run as `benchmarks.json` holds them (`--report-only`)."""
    settings = {k: tuple(v) if isinstance(v, list) else v for k, v in saved["settings"].items()}
    results = Results(machine=saved["machine"], settings=settings)
    for scenario in SCENARIOS:
        _restore(saved, results, scenario)
    return results


def main() -> None:
    args = _parse()
    chosen = SCENARIOS if not args.only else tuple(s.strip() for s in args.only.split(","))
    unknown = set(chosen) - set(SCENARIOS)
    if unknown:
        raise SystemExit(f"unknown scenarios {sorted(unknown)}; pick from {SCENARIOS}")
    args.out.mkdir(parents=True, exist_ok=True)
    json_path = args.out / "benchmarks.json"
    previous: dict[str, Any] = {}
    if (args.only or args.report_only) and json_path.exists():
        previous = json.loads(json_path.read_text(encoding="utf-8"))
    if args.report_only:
        if not previous:
            raise SystemExit(f"--report-only: no {json_path}")
        _report(load_results(previous), args.out)
        return
    dsn, embedded = resolve_dsn(args.dsn)
    try:
        settings = dict(QUICK if args.quick else FULL)
        if previous and previous.get("settings", {}).get("quick", False) != args.quick:
            raise SystemExit("--only: the previous run used other sizes (--quick or not)")
        settings["quick"] = args.quick
        # The collector's thresholds every scenario but `async_gc` runs under: Python's
        # default unless the environment changed them.
        settings["gc_thresholds"] = gc.get_threshold()
        results = Results(machine=machine(dsn), settings=settings)
        for scenario in SCENARIOS:
            if scenario not in chosen:
                _restore(previous, results, scenario)
        if "async_gc" not in chosen and "async_gc_thresholds" in previous.get("settings", {}):
            # Kept from the previous run: so are the thresholds it was measured under.
            settings["async_gc_thresholds"] = tuple(previous["settings"]["async_gc_thresholds"])
        _run(results, dsn, chosen)
    finally:
        if embedded is not None:
            embedded.stop()
    json_path.write_text(json.dumps(_to_json(results), indent=1) + "\n", encoding="utf-8")
    _report(results, args.out)


def _report(results: Results, out: Path) -> None:
    """Prints the table and targets; writes benchmarks.md and the plot into `out`."""
    after_reads = SCENARIOS.index("reads") + 1
    order = [*SCENARIOS[:after_reads], "of which bulk load", *SCENARIOS[after_reads:]]
    results.seconds = {k: results.seconds[k] for k in order if k in results.seconds}
    body = markdown(results)
    print(body)
    _write_markdown(out / "benchmarks.md", body)
    if plot(results, out / "benchmarks.png"):
        print(f"\nwrote {out / 'benchmarks.md'} and {out / 'benchmarks.png'}")
    else:
        print(
            f"\nwrote {out / 'benchmarks.md'}; no plot: matplotlib is missing "
            "(pip install -e '.[bench]')"
        )
    failed = [t.name for t in targets(results) if t.passed is False]
    if failed:
        print(f"targets not met: {', '.join(failed)}", file=sys.stderr)


if __name__ == "__main__":
    main()
