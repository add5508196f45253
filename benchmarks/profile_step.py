"""Where the time of our saver's per-step path goes.

    python benchmarks/profile_step.py [--dsn DSN] [--invokes 300]   # wall-clock breakdown
    python benchmarks/profile_step.py [--dsn DSN] --py-spy          # CPU profile (py-spy)
    ... [--durability sync|async|exit]                              # default sync

The first table gives wall and CPU time per step of the graph alone, LangGraph with a
no-op checkpointer, upstream's `PostgresSaver` and ours, taking turns in chunks, and the
saver's own CPU per step (over the no-op checkpointer; issue 16 asks to halve it). The
breakdown times the saver's own methods while the 10-node graph of
`durability_modes.py` runs (`durability="sync"` unless `--durability` says otherwise):
`put` split into building the row,
waiting for the parent checkpoint's writes, and the statement (pool checkout, round trip,
commit); `put_writes` split into serializing and the statement; `get_tuple`. Everything
else on the critical path is LangGraph's own work, measured as the graph without a
checkpointer plus the remainder. `put_writes` runs on a LangGraph worker thread, so only
the part `put` waits for is on the critical path.

`--py-spy` (`pip install py-spy`) samples whichever thread holds the GIL during the same
loop and sums the samples in groups (LangGraph's loop, our saver and what it calls).
"""

from __future__ import annotations

import argparse
import collections
import functools
import os
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench_common import ours, scratch_database, upstream
from bench_steps import NoopSaver
from durability_modes import NODES, graph_builder

from langgraph_durable.embedded import resolve_dsn

PARTS = (
    ("put", "put (whole call, on the critical path)"),
    ("put.take_parked_writes", "  taking parked writes, waiting for writes stored alone"),
    ("put._store_checkpoint", "  statement: pool checkout, round trip, commit"),
    ("put_writes", "put_writes (whole call, on a worker thread)"),
    ("put_writes.park_or_store", "  parked for the next put, or stored alone"),
    ("put_writes._store_writes", "  statement: pool checkout, round trip, commit"),
    ("get_tuple", "get_tuple (once per invoke)"),
)

# Where a GIL-held sample goes: the first top-level group whose frame fragment is on the
# stack (exclusive, they add up to 100%), and every sub-group of our saver it matches.
TOP = (
    ("our saver: put, put_writes, get_tuple and all below them", "DurablePostgresSaver."),
    ("LangGraph's executor: submit, futures, thread start", "BackgroundExecutor.submit"),
    ("LangGraph's loop, nodes and channels (the rest of Pregel.stream)", "Pregel.stream"),
    ("LangGraph's worker threads outside the saver", "_worker (concurrent"),
)
SAVER_PARTS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "psycopg execute: adapt parameters, send, read the result",
        ("Cursor.execute (psycopg", "Connection.execute (psycopg"),
    ),
    (
        "pool checkout and return",
        ("ConnectionPool.getconn (psycopg_pool", "ConnectionPool.putconn (psycopg_pool"),
    ),
    ("row building and serialization (_core)", ("checkpoint/_core.py",)),
    ("parking writes for the next checkpoint (checkpoint/_parking.py)", ("_parking.py",)),
    ("crash points (an environment lookup per call)", ("_crashpoints.py",)),
)
"""Sub-groups of our saver's samples: a sample counts in a group if any of its frame
fragments is on the stack (the saver borrows with `getconn`/`putconn` and runs statements
on a cursor, so matching only `connection()` or `Connection.execute` would find nothing)."""


class Timers:
    """Wall time and the calling thread's CPU time per wrapped method, thread-safe."""

    def __init__(self) -> None:
        self.total: dict[str, float] = collections.defaultdict(float)
        self.cpu: dict[str, float] = collections.defaultdict(float)
        self.calls: dict[str, int] = collections.defaultdict(int)
        self._lock = threading.Lock()

    def wrap(self, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def timed(*args: Any, **kwargs: Any) -> Any:
            start, cpu = time.perf_counter(), time.thread_time()
            try:
                return fn(*args, **kwargs)
            finally:
                with self._lock:
                    self.total[name] += time.perf_counter() - start
                    self.cpu[name] += time.thread_time() - cpu
                    self.calls[name] += 1

        return timed


def _instrument(saver: Any, timers: Timers) -> None:
    saver.put = timers.wrap("put", saver.put)
    saver.put_writes = timers.wrap("put_writes", saver.put_writes)
    saver.get_tuple = timers.wrap("get_tuple", saver.get_tuple)
    combiner = saver._combiner  # what put hands its statement's parameters to
    combiner.store = timers.wrap("put._store_checkpoint", combiner.store)
    saver._store_writes = timers.wrap("put_writes._store_writes", saver._store_writes)
    parking = saver._parking
    parking._take = timers.wrap("put.take_parked_writes", parking._take)
    parking.store = timers.wrap("put_writes.park_or_store", parking.store)


MODES = ("sync", "async", "exit")


def _invoke(graph: Any, mode: str = "sync") -> None:
    graph.invoke({}, {"configurable": {"thread_id": str(uuid.uuid4())}}, durability=mode)


Cost = tuple[float, float, float]
"""Wall, user CPU and system CPU, ms per step."""

CHUNKS = 10
"""The runs of the first table take turns in this many chunks each, so that a machine
whose speed drifts slows them alike."""


def _per_step(runs: dict[str, Callable[[], Any]], invokes: int) -> dict[str, Cost]:
    """(wall, user CPU, system CPU) ms per step of each run; CPU of the whole process, all
    threads. The runs take turns in `CHUNKS` chunks of invokes."""
    spent = {label: [0.0, 0.0, 0.0] for label in runs}
    chunk = max(1, invokes // CHUNKS)
    done = 0
    while done < invokes:
        count = min(chunk, invokes - done)
        for label, invoke in runs.items():
            wall, before = time.perf_counter(), os.times()
            for _ in range(count):
                invoke()
            after = os.times()
            total = spent[label]
            total[0] += time.perf_counter() - wall
            total[1] += after.user - before.user
            total[2] += after.system - before.system
        done += count
    steps = invokes * NODES
    return {
        label: (w * 1000 / steps, u * 1000 / steps, k * 1000 / steps)
        for label, (w, u, k) in spent.items()
    }


def _saver_share(costs: dict[str, Cost]) -> str:
    """The saver's own CPU per step: its run's user + system CPU over LangGraph's with the
    no-op checkpointer (what issue 16 asks to halve)."""
    _, noop_user, noop_system = costs["LangGraph with a no-op checkpointer"]

    def share(label: str) -> float:
        _, user, system = costs[label]
        return user + system - noop_user - noop_system

    mine, theirs = share("DurablePostgresSaver"), share("upstream PostgresSaver")
    ratio = f" ({mine / theirs:.2f}x)" if theirs > 0 else ""
    return (
        f"The saver's own CPU per step (user + system over LangGraph with the no-op "
        f"checkpointer): ours {mine:.3f} ms, upstream {theirs:.3f} ms{ratio}."
    )


def breakdown(dsn: str, upstream_dsn: str, invokes: int, mode: str = "sync") -> str:
    """Markdown tables: wall and CPU time per step, and ms per step by part of the path."""
    plain = graph_builder().compile()
    noop = graph_builder().compile(checkpointer=NoopSaver())
    with ours(dsn, 10) as saver, upstream(upstream_dsn, 10) as theirs:
        graph = graph_builder().compile(checkpointer=saver)
        upstream_graph = graph_builder().compile(checkpointer=theirs)
        runs: dict[str, Callable[[], Any]] = {
            "graph alone (no checkpointer)": lambda: plain.invoke({}),
            "LangGraph with a no-op checkpointer": lambda: _invoke(noop, mode),
            "upstream PostgresSaver": lambda: _invoke(upstream_graph, mode),
            "DurablePostgresSaver": lambda: _invoke(graph, mode),
        }
        _per_step(runs, 20)  # warm up
        costs = _per_step(runs, invokes)
        timers = Timers()
        _instrument(saver, timers)
        start = time.perf_counter()
        for _ in range(invokes):
            _invoke(graph, mode)
        total = time.perf_counter() - start
    steps = invokes * NODES
    alone = costs["graph alone (no checkpointer)"][0] / 1000 * steps

    def ms(seconds: float) -> str:
        return f"{seconds * 1000 / steps:.3f}"

    lines = [
        f'Wall and CPU time per step, durability="{mode}", {invokes} invokes each (CPU of '
        "all threads of this process, from `os.times()`; the server's CPU not included):",
        "",
        "| run | wall ms per step | user CPU ms per step | system CPU ms per step |",
        "|---|---:|---:|---:|",
        *(f"| {label} | {w:.3f} | {u:.3f} | {k:.3f} |" for label, (w, u, k) in costs.items()),
        "",
        _saver_share(costs),
        "",
        f"The {mode} path of DurablePostgresSaver by part ({invokes} more invokes, instrumented; "
        "CPU is the calling thread's, from `time.thread_time()`):",
        "",
        "| part | calls per step | wall ms per step | share of the step | CPU ms per step |",
        "|---|---:|---:|---:|---:|",
        f"| whole step | 1 | {ms(total)} | 100% | - |",
        f"| graph alone (no checkpointer; from the run above) | - | {ms(alone)} "
        f"| {alone / total:.0%} | - |",
    ]
    for key, label in PARTS:
        spent = timers.total.get(key, 0.0)
        lines.append(
            f"| {label} | {timers.calls.get(key, 0) / steps:.2f} | {ms(spent)} "
            f"| {spent / total:.0%} | {ms(timers.cpu.get(key, 0.0))} |"
        )

    def minus(key: str, *parts: str) -> tuple[float, float]:
        return (
            timers.total[key] - sum(timers.total[p] for p in parts),
            timers.cpu[key] - sum(timers.cpu[p] for p in parts),
        )

    put_prep = minus("put", "put.take_parked_writes", "put._store_checkpoint")
    writes_prep = minus("put_writes", "put_writes.park_or_store")
    rest = total - timers.total["put"] - timers.total["get_tuple"] - alone
    lines += [
        f"| put: building the row and serializing (put minus the above) | - "
        f"| {ms(put_prep[0])} | {put_prep[0] / total:.0%} | {ms(put_prep[1])} |",
        f"| put_writes: serializing (put_writes minus parking) | - "
        f"| {ms(writes_prep[0])} | {writes_prep[0] / total:.0%} | {ms(writes_prep[1])} |",
        f"| rest: LangGraph's checkpointing work, thread hand-offs | - | {ms(rest)} "
        f"| {rest / total:.0%} | - |",
    ]
    return "\n".join(lines)


def _loop(dsn: str, seconds: float, mode: str) -> None:
    with ours(dsn, 10, setup=False) as saver:
        graph = graph_builder().compile(checkpointer=saver)
        for _ in range(20):
            _invoke(graph, mode)
        invokes, deadline = 0, time.perf_counter() + seconds
        while time.perf_counter() < deadline:
            _invoke(graph, mode)
            invokes += 1
    print(f"invokes={invokes}")


def group_samples(stacks: list[str]) -> tuple[collections.Counter[str], int]:
    """Samples per group (`TOP`, and `SAVER_PARTS` within our saver's), and the total, from
    py-spy's raw output: one line per stack, frames joined by ';', then the count."""
    groups: collections.Counter[str] = collections.Counter()
    total = 0
    for line in stacks:
        frames_text, _, count_text = line.rpartition(" ")
        if "_loop (" not in frames_text and "_worker (concurrent" not in frames_text:
            continue  # interpreter start-up, imports, setup
        count = int(count_text)
        total += count
        top = next((label for label, fragment in TOP if fragment in frames_text), "other")
        groups[top] += count
        for label, fragments in SAVER_PARTS:
            if top == TOP[0][0] and any(f in frames_text for f in fragments):
                groups[label] += count
    return groups, total


def py_spy(dsn: str, seconds: float, rate: int = 500, mode: str = "sync") -> str:
    """Samples of the thread holding the GIL during the loop of invokes, grouped, as
    markdown."""
    with ours(dsn, 10):
        pass  # setup
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "stacks.txt"
        done = subprocess.run(
            [
                str(Path(sys.executable).with_name("py-spy")),
                "record", "--gil", "--format", "raw", "--rate", str(rate),
                "--output", str(out), "--",
                sys.executable, __file__, "--dsn", dsn, "--loop", str(seconds),
                "--durability", mode,
            ],
            check=True,
            capture_output=True,
            text=True,
        )  # fmt: skip
        stacks = out.read_text(encoding="utf-8").splitlines()
    invokes = int(done.stdout.rsplit("invokes=", 1)[1].split()[0])
    groups, total = group_samples(stacks)
    steps = invokes * NODES
    lines = [
        f"Samples of the thread holding the GIL (py-spy --gil, {rate} Hz, {total} samples) "
        f"over {seconds:g} s of {mode} invokes ({steps} steps; the sampler's pauses slow the "
        "loop down, so only the shares count):",
        "",
        "| where the GIL holder was (inclusive) | share of samples |",
        "|---|---:|",
    ]
    for label in [*(t for t, _ in TOP), "other"]:
        lines.append(f"| {label} | {groups[label] / total:.0%} |")
        if label == TOP[0][0]:
            lines += [
                f"| &nbsp;&nbsp;of which {part} | {groups[part] / total:.0%} |"
                for part, _ in SAVER_PARTS
            ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--dsn")
    parser.add_argument("--invokes", type=int, default=300)
    parser.add_argument("--py-spy", action="store_true", help="CPU profile with py-spy")
    parser.add_argument("--seconds", type=float, default=15.0, help="py-spy sampling time")
    parser.add_argument("--durability", choices=MODES, default="sync", help="the graph's mode")
    parser.add_argument("--loop", type=float, help=argparse.SUPPRESS)  # py-spy's target
    args = parser.parse_args()
    if args.loop is not None:
        _loop(args.dsn, args.loop, args.durability)
        return
    server, embedded = resolve_dsn(args.dsn)
    try:
        with (
            scratch_database(server, "profile") as dsn,
            scratch_database(server, "profile_upstream") as upstream_dsn,
        ):
            if args.py_spy:
                print(py_spy(dsn, args.seconds, mode=args.durability))
            else:
                print(breakdown(dsn, upstream_dsn, args.invokes, args.durability))
    finally:
        if embedded is not None:
            embedded.stop()


if __name__ == "__main__":
    main()
