"""Several worker processes on one Postgres: total steps/s and the server's CPU share.

    python benchmarks/bench_processes.py [--dsn DSN] [--processes 1,2,4] [--seconds 5]
        [--mode threads|async] [--pools 16,8,2]

Each worker process invokes the 10-node graph of `durability_modes.py` back to back
(`durability="sync"`, each run on a thread id of its own) with one saver, in one of two
shapes (`--mode`): 16 Python threads (`--threads`), or 64 concurrent `ainvoke` runs on one
event loop (`--runs`), as an async agent server runs them. The savers: ours
(`from_conn_string`, a pool of `POOL_SIZE`: 4), upstream's `PostgresSaver` (or
`AsyncPostgresSaver`) on one connection (`from_conn_string`) or on a pool of 4, or a no-op
saver that stores nothing (the ceiling: LangGraph's own work in that many processes on
this machine). The processes start and warm up until each of their runs has finished one
invoke, then count the steps finished over the same window (steps, not invokes: the runs
of upstream's savers queue behind one lock and finish their invokes in bursts); the total
is their sum. A run that fails stops the benchmark with its error, and a worker process
that dies stops it too. The server's CPU share is the CPU time of the local `postgres`
processes over the window (from /proc, so only for a server on this machine) divided by
the window and the number of cores.
Savers alternate within each round. `benchmarks/run.py` runs it as the `processes`
(threads) and `processes_async` scenarios; this command runs it alone, and `--pools` adds
ours on pools of other sizes (`ours:16`: the sweep behind `POOL_SIZE`; threads only). Also
counted: the machine's context switches per completed step (from /proc/stat), which fall
with the pool size.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import multiprocessing
import multiprocessing.connection
import os
import statistics
import threading
import time
import traceback
import uuid
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import Any

from bench_async import all_or_none, async_saver
from bench_common import POOL_SIZE, Stats, ours, scratch_database, upstream, upstream_single
from bench_steps import NoopSaver
from durability_modes import graph_builder

from langgraph_durable import _crashpoints

SAVERS = ("ours", "upstream_single", "upstream_pool", "noop")
MODES = ("threads", "async")
"""How a worker process runs its graphs: on Python threads, or as runs on one event loop."""


@dataclass
class ProcessesResult:
    """Total steps/s of all processes, the server's CPU share and the machine's context
    switches per step, one sample per round (the last is empty in results saved before it
    was counted)."""

    steps_per_s: list[float]
    server_share: list[float]
    switches_per_step: list[float] = field(default_factory=list)

    def rate(self) -> Stats:
        return Stats.of(self.steps_per_s)


def _postgres_cpu_seconds() -> dict[str, float]:
    """CPU seconds used so far by each local process named postgres, by pid (none without
    /proc)."""
    found: dict[str, float] = {}
    tick = os.sysconf("SC_CLK_TCK")
    try:
        pids = [p for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return found
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat", encoding="utf-8") as stat:
                fields = stat.read().rsplit(")", 1)
            with open(f"/proc/{pid}/comm", encoding="utf-8") as comm:
                if comm.read().strip() != "postgres":
                    continue
        except OSError:
            continue
        parts = fields[1].split()
        found[pid] = (int(parts[11]) + int(parts[12])) / tick  # utime, stime
    return found


def _context_switches() -> int:
    """Context switches of the whole machine since boot (0 without /proc)."""
    try:
        with open("/proc/stat", encoding="utf-8") as stat:
            for line in stat:
                if line.startswith("ctxt "):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def _pool_size(name: str) -> int:
    """Ours' pool per process: `POOL_SIZE` for "ours", N for "ours:N"."""
    return int(name.partition(":")[2] or POOL_SIZE)


def _used(before: dict[str, float], after: dict[str, float]) -> float:
    """CPU seconds used between two readings, by processes alive at the second one."""
    return sum(cpu - before.get(pid, 0.0) for pid, cpu in after.items())


class _RoundAborted(Exception):
    """The parent stopped the round before this worker's window (another one failed)."""


def _worker(name: str, dsn: str, mode: str, each: int, parent: Any) -> None:
    """One worker process: `each` threads or async runs, talking to the parent over its own
    pipe (`parent`). Sends True once every run has finished one invoke, waits for "start"
    and "stop", then sends the steps finished in between; a failure is sent as text
    instead (the parent raises it). A pipe per process, not shared events: a process killed
    while waiting on a `multiprocessing.Event` would make the parent's `set()` wait for it
    forever."""

    def warmed() -> None:
        parent.send(True)
        _crashpoints.reached("bench_processes:ready")  # the parent's test of a killed worker

    def wait_for(word: str) -> None:
        try:
            got = parent.recv()
        except (EOFError, OSError):
            got = None
        if got != word:  # the parent stopped the round early (another worker failed)
            raise _RoundAborted(f"expected {word!r} from the parent process, got {got!r}")

    try:
        if mode == "async":
            result: int | str = asyncio.run(_async_runs(name, dsn, each, warmed, wait_for))
        else:
            result = _thread_runs(name, dsn, each, warmed, wait_for)
    except _RoundAborted as exc:
        result = str(exc)  # not this worker's failure: no traceback of its own
    except BaseException as exc:
        traceback.print_exc()
        result = f"{name} worker process ({mode}): {type(exc).__name__}: {exc}"
    with contextlib.suppress(OSError):  # the parent gave up on this round
        parent.send(result)
    parent.close()


def _thread_runs(
    name: str,
    dsn: str,
    threads: int,
    warmed: Callable[[], None],
    wait_for: Callable[[str], None],
) -> int:
    with ExitStack() as stack:
        if name == "noop":
            saver: Any = NoopSaver()
        elif name.startswith("ours"):
            saver = stack.enter_context(ours(dsn, _pool_size(name), setup=False))
        elif name == "upstream_single":
            saver = stack.enter_context(upstream_single(dsn, setup=False))
        else:
            saver = stack.enter_context(upstream(dsn, POOL_SIZE, setup=False))
        graph = graph_builder().compile(checkpointer=saver)
        counts = [0] * threads
        failed: list[BaseException] = []
        counting, done, all_warm = threading.Event(), threading.Event(), threading.Event()
        lock = threading.Lock()
        cold = threads

        def run(i: int) -> None:
            nonlocal cold
            first = True
            try:
                while not done.is_set():
                    config: Any = {"configurable": {"thread_id": str(uuid.uuid4())}}
                    # Steps, not invokes: whole invokes finished in a window would count
                    # runs that move in lockstep (one lock for all) in bursts.
                    for _ in graph.stream({}, config, durability="sync", stream_mode="updates"):
                        if counting.is_set():
                            counts[i] += 1
                    if first:
                        first = False
                        with lock:
                            cold -= 1
                            if not cold:
                                all_warm.set()
            except BaseException as exc:
                failed.append(exc)
                all_warm.set()

        pool = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(threads)]
        try:
            for t in pool:
                t.start()
            all_warm.wait()  # every thread has finished one invoke (or one failed)
            if failed:
                raise failed[0]
            warmed()
            wait_for("start")
            counting.set()
            wait_for("stop")
            counting.clear()
        finally:
            done.set()
            for t in pool:
                t.join()
        if failed:
            raise failed[0]
        return sum(counts)


async def _async_runs(
    name: str,
    dsn: str,
    runs: int,
    warmed: Callable[[], None],
    wait_for: Callable[[str], None],
) -> int:
    async with async_saver(name, dsn, setup=False) as saver:
        graph = graph_builder().compile(checkpointer=saver)
        counting = done = False
        steps, cold = 0, runs
        all_warm = asyncio.Event()

        async def run() -> None:
            nonlocal steps, cold
            first = True
            try:
                while not done:
                    config: Any = {"configurable": {"thread_id": str(uuid.uuid4())}}
                    # Steps, not invokes (see `_thread_runs`): upstream's runs on one loop
                    # queue behind one lock and finish their invokes together.
                    async for _ in graph.astream(
                        {}, config, durability="sync", stream_mode="updates"
                    ):
                        if counting:
                            steps += 1
                    if first:
                        first, cold = False, cold - 1
                        if not cold:
                            all_warm.set()
            except BaseException:
                all_warm.set()
                raise

        tasks = [asyncio.create_task(run()) for _ in range(runs)]
        loop = asyncio.get_running_loop()
        try:
            await all_warm.wait()  # every run has finished one invoke (or one failed)
            if any(task.done() for task in tasks):
                await all_or_none(tasks)  # raises the failed run's error
            warmed()
            # The runs go on while this waits: reading the pipe blocks, in a thread.
            await loop.run_in_executor(None, wait_for, "start")
            counting = True
            await loop.run_in_executor(None, wait_for, "stop")
            counting, done = False, True
            await all_or_none(tasks)
        finally:  # an early end: no run left in flight when the saver closes
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        return steps


READY_SECONDS = 300.0
"""How long a worker process may take to start, connect and finish its warm-up runs."""
DONE_SECONDS = 120.0
"""How long the workers may take to report their counts once the window has closed."""


def _one_from_each(pipes: list[Any], seconds: float, what: str) -> list[Any]:
    """One message from each worker's pipe. Raises RuntimeError for an error a worker sent,
    for a worker process that ended without sending (killed, crashed), or after `seconds`."""
    items: dict[int, Any] = {}
    deadline = time.monotonic() + seconds
    while len(items) < len(pipes):
        waiting = [pipe for i, pipe in enumerate(pipes) if i not in items]
        left = deadline - time.monotonic()
        arrived = multiprocessing.connection.wait(waiting, timeout=max(left, 0))
        if not arrived:
            raise RuntimeError(f"worker processes not {what} after {seconds:.0f} s")
        for pipe in arrived:
            try:
                item = pipe.recv()
            except (EOFError, OSError):  # OSError: reset, when it died with words unread
                raise RuntimeError(
                    f"a worker process ended (killed or crashed) before it was {what}"
                ) from None
            if isinstance(item, str):
                raise RuntimeError(item)
            items[pipes.index(pipe)] = item
    return [items[i] for i in range(len(pipes))]


def _round(
    name: str, dsn: str, processes: int, each: int, seconds: float, mode: str
) -> tuple[float, float, float]:
    """(total steps/s, the server's CPU share of the machine, the machine's context switches
    per step) for one saver, `each` threads or async runs per process. Whatever happens,
    no worker process outlives the round."""
    ctx = multiprocessing.get_context("spawn")
    pipes: list[Any] = []
    workers: list[Any] = []

    def tell_all(word: str) -> None:
        for pipe in pipes:
            with contextlib.suppress(OSError):  # a worker that is gone already
                pipe.send(word)

    try:
        for _ in range(processes):
            mine, theirs = ctx.Pipe()
            worker = ctx.Process(target=_worker, args=(name, dsn, mode, each, theirs))
            worker.start()
            theirs.close()  # only the worker holds its end: its death reads as EOF here
            pipes.append(mine)
            workers.append(worker)
        # imports, connections, a finished run on every thread or task of every process
        _one_from_each(pipes, READY_SECONDS, "ready")
        began, server_before = time.perf_counter(), _postgres_cpu_seconds()
        switches_before = _context_switches()
        tell_all("start")
        time.sleep(seconds)
        tell_all("stop")
        elapsed = time.perf_counter() - began
        server = _used(server_before, _postgres_cpu_seconds())
        switches = _context_switches() - switches_before
        steps = sum(_one_from_each(pipes, DONE_SECONDS, "done"))
    finally:
        tell_all("stop")  # a worker still waiting for "start" takes this and stops
        for worker in workers:
            worker.join(30)
            if worker.is_alive():
                worker.terminate()
                worker.join(5)
            if worker.is_alive():
                worker.kill()
                worker.join()
        for pipe in pipes:
            pipe.close()
    return steps / elapsed, server / elapsed / (os.cpu_count() or 1), switches / max(steps, 1)


def processes_benchmark(
    upstream_dsn: str,
    ours_dsn: str,
    levels: tuple[int, ...],
    each: int,
    seconds: float,
    rounds: int,
    savers: tuple[str, ...] = SAVERS,
    mode: str = "threads",
) -> dict[tuple[str, int], ProcessesResult]:
    """Results keyed by (saver, number of processes); savers alternate within each round.
    Each process runs `each` threads (`mode` "threads") or async runs on one loop ("async").

    `savers` may add ours on other pool sizes, named "ours:N" (threads only)."""
    if mode not in MODES:
        raise ValueError(f"mode {mode!r}: pick one of {MODES}")
    if mode == "async" and set(savers) - set(SAVERS):
        raise ValueError("other pool sizes for ours (--pools) are for the threads mode only")
    with ours(ours_dsn, 1), upstream(upstream_dsn, 1):
        pass  # setup() once, before any worker starts
    found: dict[tuple[str, int], ProcessesResult] = {}
    for round_ in range(rounds):
        for level in levels:
            names = savers if round_ % 2 == 0 else tuple(reversed(savers))
            for name in names:
                target = ours_dsn if name.startswith("ours") else upstream_dsn
                rate, share, switches = _round(name, target, level, each, seconds, mode)
                result = found.setdefault((name, level), ProcessesResult([], []))
                result.steps_per_s.append(rate)
                result.server_share.append(share)
                result.switches_per_step.append(switches)
    return found


def main() -> None:
    from langgraph_durable.embedded import resolve_dsn

    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--dsn")
    parser.add_argument("--processes", default="1,2,4")
    parser.add_argument("--mode", choices=MODES, default="threads")
    parser.add_argument("--threads", type=int, default=16, help="per process (threads mode)")
    parser.add_argument("--runs", type=int, default=64, help="per process (async mode)")
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument(
        "--pools", default="", help=f"more pool sizes for ours (besides {POOL_SIZE}), e.g. 16,8"
    )
    args = parser.parse_args()
    levels = tuple(int(x) for x in args.processes.split(","))
    extra = tuple(f"ours:{int(x)}" for x in args.pools.split(",") if x.strip())
    dsn, embedded = resolve_dsn(args.dsn)
    try:
        with (
            scratch_database(dsn, "procs_upstream") as upstream_dsn,
            scratch_database(dsn, "procs_ours") as ours_dsn,
        ):
            found = processes_benchmark(
                upstream_dsn,
                ours_dsn,
                levels,
                args.runs if args.mode == "async" else args.threads,
                args.seconds,
                args.rounds,
                (*SAVERS, *extra),
                mode=args.mode,
            )
    finally:
        if embedded is not None:
            embedded.stop()
    for (name, level), result in sorted(found.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        rates = result.steps_per_s
        print(
            f"{level} process(es) {name:16s} steps/s {statistics.median(rates):7,.0f} "
            f"({min(rates):,.0f}-{max(rates):,.0f}), "
            f"server CPU {statistics.median(result.server_share):.0%}, "
            f"context switches per step {statistics.median(result.switches_per_step):.1f}"
        )


if __name__ == "__main__":
    main()
