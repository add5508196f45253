"""Shared helpers of `benchmarks/run.py`: statistics, scratch databases, savers, the machine.

Both savers are opened here the same way in every scenario. Upstream in both of its setups,
because which one is faster depends on the load: `PostgresSaver.from_conn_string` (one
connection, as its README shows; on 2 cores with a local server the faster one) and
`PostgresSaver` on a psycopg `ConnectionPool` with the same settings (autocommit,
`prepare_threshold=0`, `dict_row`). Every ratio is taken against the faster of the two,
measured in the same run (`best_upstream`). Ours from `DurablePostgresSaver.from_conn_string`,
with a pool of the size the scenario asks for.
"""

from __future__ import annotations

import gc
import os
import platform
import secrets
import statistics
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any

import psycopg
from langgraph.checkpoint.postgres import PostgresSaver
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg.rows import dict_row
from psycopg_pool import ConnectionPool

from langgraph_durable import DurablePostgresSaver

ROOT = Path(__file__).resolve().parents[1]

POOL_SIZE = 4
"""Connections per process of every pooled saver in the throughput, async and process
scenarios (ours, and upstream's pool, whose one lock uses one at a time anyway): psycopg_pool's
default size. More only add contention on a small server: on this 2-core machine, with 4
worker processes of 16 threads each, ours gave 985-1,044 steps/s on pools of 4 against
686-778 on pools of 16 in the same rounds, and 1 process or one event loop ran as fast on 4
as on 16 (docs/benchmarks.md, "Pool size")."""

SERVER_GC_THRESHOLDS = (50_000, 50, 100)
"""`gc.set_threshold` for a process that keeps many graph runs in flight on one event loop:
the README's setting ("Many runs on one event loop"), measured by `run.py`'s `async_gc`
scenario. Under CPython 3.10-3.13's default (700, 10, 10) the full collections, which walk
every object the collector tracks, come more often as more runs are in flight, and
LangGraph's own CPU per step rises with them."""


@contextmanager
def gc_thresholds(thresholds: tuple[int, int, int] | None) -> Iterator[None]:
    """Python's collector set to `thresholds` for the block (None: left as it is), and set
    back afterwards."""
    if thresholds is None:
        yield
        return
    before = gc.get_threshold()
    gc.set_threshold(*thresholds)
    try:
        yield
    finally:
        gc.set_threshold(*before)


UPSTREAM_KWARGS: dict[str, Any] = {
    "autocommit": True,
    "prepare_threshold": 0,
    "row_factory": dict_row,
}

PACKAGES = (
    "langgraph-durable",
    "langgraph",
    "langgraph-checkpoint",
    "langgraph-checkpoint-postgres",
    "langchain-core",
    "psycopg",
    "psycopg-pool",
)


@dataclass(frozen=True)
class Stats:
    """Median and 95th percentile of timing samples (same unit as the samples)."""

    median: float
    p95: float
    n: int

    @classmethod
    def of(cls, samples: list[float]) -> Stats:
        if not samples:
            raise ValueError("no samples")
        ordered = sorted(samples)
        p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
        return cls(statistics.median(ordered), p95, len(ordered))


TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def postgres_cpu_seconds() -> float:
    """User + system CPU seconds of every `postgres` process of this machine so far (0
    without /proc, or for a server on another machine)."""
    total = 0
    try:
        names = os.listdir("/proc")
    except OSError:
        return 0.0
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/comm", encoding="utf-8") as comm:
                if comm.read().strip() != "postgres":
                    continue
            with open(f"/proc/{name}/stat", encoding="ascii") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:  # the process ended meanwhile
            continue
        total += int(fields[11]) + int(fields[12])
    return total / TICKS


@dataclass
class Cost:
    """Seconds spent over `calls` calls: wall, this process's CPU, the server's CPU."""

    wall: float = 0.0
    client: float = 0.0
    server: float = 0.0
    calls: int = 0

    def per_call_us(self) -> tuple[float, float, float, float]:
        """(wall, client CPU, server CPU, the rest of the wall time) in µs per call."""
        n = max(self.calls, 1)
        wall, client, server = (x * 1e6 / n for x in (self.wall, self.client, self.server))
        return wall, client, server, wall - client - server


def costs_in_turns(calls: dict[Any, Callable[[], Any]], total: int, chunks: int) -> dict[Any, Cost]:
    """About `total` calls of each callable (at least one per chunk), taking turns in
    `chunks` chunks, the order reversed on every other turn so that drift and a call's
    after-effects on the next fall on all alike: wall time, this process's CPU
    (`time.process_time`) and the local server's (`postgres_cpu_seconds`, read around each
    chunk, so it is resolved to its 10 ms clock ticks per chunk)."""
    costs = {name: Cost() for name in calls}
    chunks = min(chunks, total)
    size = total // chunks
    for turn in range(chunks):
        for name in list(calls) if turn % 2 == 0 else list(reversed(calls)):
            fn, cost = calls[name], costs[name]
            server, client, wall = postgres_cpu_seconds(), time.process_time(), time.perf_counter()
            for _ in range(size):
                fn()
            cost.wall += time.perf_counter() - wall
            cost.client += time.process_time() - client
            cost.server += postgres_cpu_seconds() - server
            cost.calls += size
    return costs


def timed_ms(fn: Callable[[], Any]) -> float:
    """Wall time of one call, in milliseconds."""
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1000


def dsn_for(dsn: str, dbname: str) -> str:
    """`dsn` with its database replaced."""
    params = conninfo_to_dict(dsn)
    params["dbname"] = dbname
    return make_conninfo("", **params)


@contextmanager
def scratch_database(server_dsn: str, tag: str, copy_of: str | None = None) -> Iterator[str]:
    """A new database on the server of `server_dsn`, dropped afterwards.

    Empty, or a copy of the database of the DSN `copy_of` (which nobody may be connected
    to meanwhile).
    """
    name = f"lgd_bench_{tag}_{os.getpid()}_{secrets.token_hex(3)}"
    template = conninfo_to_dict(copy_of).get("dbname") if copy_of else "template0"
    create = sql.SQL("CREATE DATABASE {} TEMPLATE {} ENCODING 'UTF8'").format(
        sql.Identifier(name), sql.Identifier(str(template))
    )
    with psycopg.connect(server_dsn, autocommit=True) as conn:
        # Autovacuum may be connected to a freshly loaded template for a moment (longer on
        # a loaded machine); copying it then fails with "being accessed by other users", so
        # try again until it has left, for up to a minute.
        deadline = time.monotonic() + 60
        while True:
            try:
                conn.execute(create)
                break
            except psycopg.errors.ObjectInUse:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
    try:
        yield dsn_for(server_dsn, name)
    finally:
        with psycopg.connect(server_dsn, autocommit=True) as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )


UPSTREAM_SETUPS = ("upstream_single", "upstream_pool")
"""Upstream's two setups, as keyed in the results: `from_conn_string` and a pool."""

SETUP_LABELS = {
    "upstream_single": "one connection (from_conn_string)",
    "upstream_pool": "pool",
}


def best_upstream(
    stats: dict[Any, Stats], *rest: Any, higher_is_better: bool = False
) -> tuple[Stats, str]:
    """The faster of upstream's setups measured in `stats`, and its name.

    A setup's entry is keyed `(setup, *rest)` (`setup` is `"upstream_single"` or
    `"upstream_pool"`); results of older runs that measured only the pool, as `"upstream"`,
    are read too.
    """
    keys = {s: (s, *rest) for s in (*UPSTREAM_SETUPS, "upstream")}
    found = [(stats[keys[s]], s) for s in UPSTREAM_SETUPS if keys[s] in stats]
    if not found:
        found = [(stats[keys["upstream"]], "upstream_pool")]
    pick = max if higher_is_better else min
    return pick(found, key=lambda pair: pair[0].median)


@contextmanager
def upstream_single(dsn: str, *, setup: bool = True) -> Iterator[PostgresSaver]:
    """Upstream's `PostgresSaver.from_conn_string`: one connection, calls behind one lock."""
    with PostgresSaver.from_conn_string(dsn) as saver:
        if setup:
            saver.setup()
        yield saver


@contextmanager
def upstream(dsn: str, pool_size: int, *, setup: bool = True) -> Iterator[PostgresSaver]:
    """Upstream's `PostgresSaver` on a `ConnectionPool` (its one lock still serialises calls)."""
    with ConnectionPool(
        dsn, min_size=1, max_size=pool_size, kwargs=UPSTREAM_KWARGS, open=True
    ) as pool:
        saver = PostgresSaver(pool)  # type: ignore[arg-type]  # pool of dict-row connections
        if setup:
            saver.setup()
        yield saver


@contextmanager
def ours(
    dsn: str, pool_size: int, *, setup: bool = True, **options: Any
) -> Iterator[DurablePostgresSaver]:
    """Our saver on its own pool (`from_conn_string`), as the README recommends."""
    with DurablePostgresSaver.from_conn_string(dsn, max_connections=pool_size, **options) as saver:
        if setup:
            saver.setup()
        yield saver


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            for line in info:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _memory() -> str:
    try:
        with open("/proc/meminfo", encoding="utf-8") as info:
            for line in info:
                if line.startswith("MemTotal:"):
                    return f"{int(line.split()[1]) / 1024 / 1024:.1f} GiB"
    except OSError:
        pass
    return "?"


def _git_revision() -> str:
    try:
        found = subprocess.run(
            ["git", "-C", str(ROOT), "describe", "--always", "--dirty"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        )
    except (OSError, subprocess.SubprocessError):
        return "?"
    return found.stdout.strip()


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "not installed"


def machine(dsn: str) -> dict[str, str]:
    """What the numbers depend on: CPU, Postgres and its commit settings, Python, packages."""
    names = ("fsync", "synchronous_commit", "wal_sync_method", "shared_buffers")
    with psycopg.connect(dsn, autocommit=True) as conn:
        settings = ", ".join(
            f"{name}={row[0]}"
            for name in names
            if (row := conn.execute("SELECT current_setting(%s)", (name,)).fetchone())
        )
        version = conn.execute("SHOW server_version").fetchone()
    try:
        load = "{:.2f} {:.2f} {:.2f}".format(*os.getloadavg())
    except OSError:
        load = "?"
    packages = ", ".join(f"{p} {_version(p)}" for p in PACKAGES)
    return {
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "cpu": f"{_cpu_model()}, {os.cpu_count()} cores, {_memory()} RAM",
        "os": f"{platform.system()} {platform.release()} ({platform.machine()})",
        "postgres": f"PostgreSQL {version[0] if version else '?'} on "
        f"{conninfo_to_dict(dsn).get('host') or 'local socket'} ({settings})",
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "packages": f"{packages}; libpq {psycopg.pq.version()}, psycopg impl {psycopg.pq.__impl__}",
        "revision": _git_revision(),
        "load average at start": load,
    }
