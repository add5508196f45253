"""The server's CPU per step, ours against upstream's single connection.

    python benchmarks/server_cpu.py [--dsn DSN] [--threads 1,16] [--invokes 20] [--rounds 6]

On 2 cores the server's work competes with the savers' own, so a saver that costs the
server less per step leaves more CPU to everything else. This runs the 10-node graph of
`durability_modes.py` under `durability="sync"`, `--threads` threads at a time, each
invoking `--invokes` new threads, ours and upstream's `from_conn_string` taking turns
for `--rounds` rounds, each in a database of its own, and reads around every turn the
CPU time (user + system) of every `postgres` process of this machine, from `/proc` (the
backends, and the WAL writer and checkpointer they keep busy): only for a server on this
machine. (Commit counts are left out: `pg_stat_database` is updated by each backend at
most once a second, so a turn's count lags.)

Medians over rounds, per step. The other saver's turn runs while nothing else does, so
the processes' CPU in a turn is the saver's (plus whatever else runs on the machine:
run it on a quiet one).
"""

from __future__ import annotations

import argparse
import statistics
import threading
import uuid
from collections.abc import Callable
from contextlib import ExitStack
from typing import Any

from bench_common import ours, postgres_cpu_seconds, scratch_database, upstream_single
from durability_modes import NODES, graph_builder

from langgraph_durable.embedded import resolve_dsn


def run_threads(invoke: Callable[[], None], threads: int, invokes: int) -> None:
    """`threads` threads, each calling `invoke` `invokes` times; errors are raised."""
    errors: list[BaseException] = []

    def work() -> None:
        try:
            for _ in range(invokes):
                invoke()
        except BaseException as exc:  # re-raised below, in the caller's thread
            errors.append(exc)

    started = [threading.Thread(target=work) for _ in range(threads)]
    for thread in started:
        thread.start()
    for thread in started:
        thread.join()
    if errors:
        raise errors[0]


def measure(dsn: str, threads: int, invokes: int, rounds: int) -> dict[str, float]:
    """Server CPU µs per step, median over rounds, keyed "ours" / "upstream"."""
    samples: dict[str, list[float]] = {"ours": [], "upstream": []}
    with ExitStack() as stack:
        ours_dsn = stack.enter_context(scratch_database(dsn, "server_cpu_ours"))
        upstream_dsn = stack.enter_context(scratch_database(dsn, "server_cpu_upstream"))
        savers = {
            "ours": stack.enter_context(ours(ours_dsn, threads)),
            "upstream": stack.enter_context(upstream_single(upstream_dsn)),
        }
        turns = []
        for label, saver in savers.items():
            graph = graph_builder().compile(checkpointer=saver)

            def invoke(graph: Any = graph) -> None:
                config = {"configurable": {"thread_id": str(uuid.uuid4())}}
                graph.invoke({}, config, durability="sync")

            invoke()  # warm up: prepared statements, the pool's first connection
            turns.append((label, invoke))
        steps = threads * invokes * NODES
        for round_ in range(rounds):
            for label, invoke in turns if round_ % 2 == 0 else turns[::-1]:
                cpu = postgres_cpu_seconds()
                run_threads(invoke, threads, invokes)
                samples[label].append((postgres_cpu_seconds() - cpu) / steps * 1e6)
    return {label: statistics.median(values) for label, values in samples.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--dsn")
    parser.add_argument("--threads", default="1,16", help="comma-separated thread counts")
    parser.add_argument("--invokes", type=int, default=20, help="invokes per thread and turn")
    parser.add_argument("--rounds", type=int, default=6)
    args = parser.parse_args()
    try:
        levels = [int(level) for level in args.threads.split(",")]
    except ValueError:
        parser.error("--threads takes comma-separated whole numbers, e.g. 1,16")
    if min([*levels, args.invokes, args.rounds]) < 1:
        parser.error("--threads, --invokes and --rounds must be positive")
    dsn, embedded = resolve_dsn(args.dsn)
    try:
        if postgres_cpu_seconds() == 0:
            print(
                "No `postgres` process with CPU time on this machine: the server CPU column "
                "reads 0 (run this next to the server).\n",
                flush=True,
            )
        print(
            'Server CPU per step (every local `postgres` process), durability="sync":',
            "",
            "| threads | saver | server CPU µs per step |",
            "|---:|---|---:|",
            sep="\n",
            flush=True,
        )
        for threads in levels:
            found = measure(dsn, threads, args.invokes, args.rounds)
            for label, cpu in found.items():
                print(f"| {threads} | {label} | {cpu:.0f} |", flush=True)
    finally:
        if embedded is not None:
            embedded.stop()


if __name__ == "__main__":
    main()
