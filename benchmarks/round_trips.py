"""What one round trip to the server costs on this machine, by where its backend runs.

    python benchmarks/round_trips.py [--dsn DSN] [--connections 6] [--calls 200] [--rounds 20]

A saver's per-call numbers include the wake-ups of a round trip: the client's send wakes
the server's backend process, its reply wakes the client. On a virtual machine a wake-up
on another CPU can cost far more than one on the same CPU, and the kernel decides for each
backend where it runs. Then two connections of one process differ in speed for as long as
their backends stay where they are, and so do two runs of a benchmark that each open
fresh connections: compare savers on one connection, or over several, not one each.

Two tables, `SELECT 1` on connections opened with the savers' settings, all taking turns:

1. `--connections` connections as the kernel places them: median µs per call of each
   (its backend's last CPU is read from `/proc`, so only for a server on this machine);
2. with this process pinned to its first allowed CPU and each backend pinned to that CPU
   or to another one (`os.sched_setaffinity`, which needs a server on this machine run by
   the same user, or root); skipped, with the reason, when pinning is not allowed.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager

import psycopg

from langgraph_durable._db import CONNECTION_KWARGS
from langgraph_durable.embedded import resolve_dsn


def per_call_us(conns: list[psycopg.Connection[object]], calls: int, rounds: int) -> list[float]:
    """Median µs per `SELECT 1` of each connection; connections take turns, `calls` each
    per round."""
    spent: list[list[float]] = [[] for _ in conns]
    for _ in range(rounds):
        for i, conn in enumerate(conns):
            start = time.perf_counter()
            for _ in range(calls):
                conn.execute("SELECT 1").fetchone()
            spent[i].append((time.perf_counter() - start) / calls * 1e6)
    return [statistics.median(samples) for samples in spent]


def is_local_backend(pid: int) -> bool:
    """Whether `pid` is a Postgres process of this machine. A remote server's backend pid
    may be any local process's: such a process is neither read nor pinned."""
    try:
        with open(f"/proc/{pid}/comm", encoding="utf-8") as comm:
            return comm.read().strip() == "postgres"
    except OSError:
        return False


def last_cpu(pid: int) -> str:
    """The CPU a local backend last ran on, or "?" (field 39 of /proc/PID/stat)."""
    if not is_local_backend(pid):
        return "?"
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            return stat.read().rsplit(")", 1)[1].split()[36]
    except (OSError, IndexError):
        return "?"


@contextmanager
def pinned_to(cpus: set[int]) -> Iterator[None]:
    """This process on `cpus` only, for the block."""
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, cpus)
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


def open_connections(stack: ExitStack, dsn: str, count: int) -> list[psycopg.Connection[object]]:
    return [
        stack.enter_context(psycopg.Connection.connect(dsn, **CONNECTION_KWARGS))
        for _ in range(count)
    ]


def placed_by_kernel(dsn: str, count: int, calls: int, rounds: int) -> list[str]:
    with ExitStack() as stack:
        conns = open_connections(stack, dsn, count)
        medians = per_call_us(conns, calls, rounds)
        cpus = [last_cpu(conn.info.backend_pid) for conn in conns]
    lines = [
        f"{count} connections as the kernel places their backends, `SELECT 1`, median of "
        f"{rounds} rounds of {calls} calls each, connections taking turns:",
        "",
        "| connection | µs per call | backend's last CPU |",
        "|---:|---:|---:|",
    ]
    lines += [
        f"| {i + 1} | {us:.1f} | {cpu} |"
        for i, (us, cpu) in enumerate(zip(medians, cpus, strict=True))
    ]
    spread = max(medians) / min(medians)
    lines += ["", f"Slowest / fastest connection: {spread:.2f}x."]
    return lines


def placed_by_hand(dsn: str, calls: int, rounds: int) -> list[str]:
    allowed = sorted(os.sched_getaffinity(0))
    if len(allowed) < 2:
        return ["Pinning skipped: this process may run on one CPU only."]
    here, there = allowed[0], allowed[1]
    with ExitStack() as stack:
        conns = open_connections(stack, dsn, 4)
        if not all(is_local_backend(conn.info.backend_pid) for conn in conns):
            return ["Pinning skipped: the server's backends are not processes of this machine."]
        try:
            for i, conn in enumerate(conns):
                os.sched_setaffinity(conn.info.backend_pid, {here if i % 2 == 0 else there})
        except OSError as exc:
            return [f"Pinning skipped: cannot pin the server's backends ({exc.strerror})."]
        with pinned_to({here}):
            medians = per_call_us(conns, calls, rounds)
    same = statistics.median(medians[0::2])
    other = statistics.median(medians[1::2])
    return [
        f"This process on CPU {here}; two backends pinned to the same CPU, two to CPU "
        f"{there}, the same calls:",
        "",
        "| backend | µs per call |",
        "|---|---:|",
        f"| on the client's CPU | {same:.1f} |",
        f"| on another CPU | {other:.1f} |",
        "",
        f"A round trip across CPUs costs {other - same:.0f} µs more ({other / same:.1f}x).",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--dsn")
    parser.add_argument("--connections", type=int, default=6)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    if min(args.connections, args.calls, args.rounds) < 1:
        parser.error("--connections, --calls and --rounds must be positive")
    dsn, embedded = resolve_dsn(args.dsn)
    steps: list[Callable[[], list[str]]] = [
        lambda: placed_by_kernel(dsn, args.connections, args.calls, args.rounds),
        lambda: placed_by_hand(dsn, args.calls, args.rounds),
    ]
    try:
        for step in steps:
            print("\n".join(step()), end="\n\n", flush=True)
    finally:
        if embedded is not None:
            embedded.stop()


if __name__ == "__main__":
    main()
