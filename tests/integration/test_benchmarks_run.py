"""The benchmarks run in their quick mode, so they never rot; no timing is asserted."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from psycopg.conninfo import make_conninfo

ROOT = Path(__file__).resolve().parents[2]


def _run(script: str, *args: str) -> str:
    """Runs `benchmarks/<script>` with `args`; its output, after checking it succeeded."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / script), *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def _python(code: str, **env: str) -> str:
    """Runs `code` in a new Python process (with `env` added to the environment); its
    output, after checking it succeeded."""
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={**os.environ, **env},
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_durability_modes_benchmark_quick(db_dsn: str) -> None:
    out = _run("durability_modes.py", "--quick", "--dsn", db_dsn)
    for mode in ("sync", "async", "exit"):
        for saver in (
            "DurablePostgresSaver",
            "upstream PostgresSaver (one connection)",
            "upstream PostgresSaver (pool)",
        ):
            assert f"| {saver} | {mode} |" in out, (saver, mode)
    # Each mode's ratios are against the faster of upstream's two setups, named per mode.
    assert "| ratio to upstream's faster setup |" in out
    assert "Upstream's faster setup: sync: " in out


def test_async_cpu_by_level_runs(db_dsn: str) -> None:
    out = _run(
        "async_cpu_by_level.py",
        *("--dsn", db_dsn, "--levels", "2,4", "--runs", "4", "--alternations", "1"),
    )
    rows = [line for line in out.splitlines() if line.startswith(("| 2 |", "| 4 |"))]
    assert len(rows) == 2, out


def test_profile_step_reports_the_savers_own_cpu(db_dsn: str) -> None:
    out = _run("profile_step.py", "--dsn", db_dsn, "--invokes", "3")
    assert "The saver's own CPU per step" in out
    assert "| put (whole call, on the critical path) |" in out


def test_profile_step_runs_in_every_durability_mode(db_dsn: str) -> None:
    for mode in ("async", "exit"):
        out = _run("profile_step.py", "--dsn", db_dsn, "--invokes", "2", "--durability", mode)
        assert f'durability="{mode}"' in out, out
        assert f"The {mode} path of DurablePostgresSaver by part" in out, out


def test_profile_effect_reports_each_layer(db_dsn: str) -> None:
    out = _run("profile_effect.py", "--dsn", db_dsn, "--calls", "4", "--chunks", "2")
    assert "| @effect call |" in out, out
    assert "| two single-row INSERT + commit (the floor) |" in out, out
    assert "| the journal's statements over two plain inserts |" in out, out
    assert "Python between round trips: the @effect call on an in-memory journal" in out, out


def test_bench_large_profiles_each_saver_s_calls(db_dsn: str) -> None:
    out = _run("bench_large.py", "--dsn", db_dsn, "--sizes", "1e3", "--profile", "--calls", "4")
    for saver in ("ours", "upstream_single", "upstream_pool"):
        assert f"| {saver} | put |" in out, out
        assert f"| {saver} | get_tuple |" in out, out
    assert "| ours | put statement alone |" in out, out
    assert "| upstream | put statements alone (pipeline) |" in out, out
    assert "What each saver's `put` adds to its statements alone" in out, out


def test_round_trips_reports_each_connection_and_the_cross_cpu_cost(db_dsn: str) -> None:
    out = _run(
        "round_trips.py",
        *("--dsn", db_dsn, "--connections", "2", "--calls", "3", "--rounds", "2"),
    )
    rows = [line for line in out.splitlines() if line.startswith(("| 1 |", "| 2 |"))]
    assert len(rows) == 2, out
    assert "Slowest / fastest connection:" in out
    # Pinning needs a local server and the right to move its processes; else it says why.
    assert "A round trip across CPUs costs" in out or "Pinning skipped:" in out


def test_server_cpu_reports_both_savers(db_dsn: str) -> None:
    out = _run(
        "server_cpu.py",
        *("--dsn", db_dsn, "--threads", "2", "--invokes", "1", "--rounds", "1"),
    )
    assert "| 2 | ours |" in out, out
    assert "| 2 | upstream |" in out, out


def test_processes_runs_ours_on_other_pool_sizes_and_counts_context_switches(
    db_dsn: str,
) -> None:
    out = _run(
        "bench_processes.py",
        *("--dsn", db_dsn, "--processes", "1", "--threads", "2", "--seconds", "0.3"),
        *("--rounds", "1", "--pools", "2"),
    )
    rows = [line for line in out.splitlines() if line.startswith("1 process(es) ")]
    names = {line.split()[2] for line in rows}
    assert names == {"ours", "ours:2", "upstream_single", "upstream_pool", "noop"}, out
    assert all("context switches per step" in line for line in rows), out


def test_a_failing_worker_process_stops_the_processes_benchmark_with_its_error(
    db_dsn: str,
) -> None:
    """In both modes, the error of a run in a worker process reaches the caller (it used to
    leave a short count, or the parent waiting on a process that was gone)."""
    missing = make_conninfo(db_dsn, dbname="lgd_no_such_database")
    code = (
        "import sys\n"
        f"sys.path.insert(0, {str(ROOT / 'benchmarks')!r})\n"
        "from bench_processes import _round\n"
        "if __name__ == '__main__':\n"
        "    for mode in ('async', 'threads'):\n"
        "        try:\n"
        f"            _round('ours', {missing!r}, 2, 2, 0.1, mode)\n"
        "        except RuntimeError as exc:\n"
        "            print('raised:', exc)\n"
    )
    out = _python(code)
    for mode in ("async", "threads"):
        assert f"raised: ours worker process ({mode}): DatabaseUnreachableError" in out


def test_a_worker_process_killed_mid_round_stops_it_and_none_is_left() -> None:
    """Every worker SIGKILLs itself once it has reported ready (a crash point): the round
    raises, in both modes, instead of waiting on them, and no worker process outlives it."""
    code = (
        "import multiprocessing, sys\n"
        f"sys.path.insert(0, {str(ROOT / 'benchmarks')!r})\n"
        "from bench_processes import _round\n"
        "if __name__ == '__main__':\n"
        "    for mode in ('async', 'threads'):\n"
        "        try:\n"
        "            _round('noop', '', 2, 2, 0.1, mode)\n"
        "        except RuntimeError as exc:\n"
        "            print(mode, 'raised:', exc)\n"
        "        print(mode, 'left:', len(multiprocessing.active_children()))\n"
    )
    out = _python(code, LANGGRAPH_DURABLE_CRASH_AT="bench_processes:ready")
    for mode in ("async", "threads"):
        assert f"{mode} raised: a worker process ended (killed or crashed)" in out
        assert f"{mode} left: 0" in out


def test_profile_loading_compares_both_loads() -> None:
    out = _run("profile_loading.py", "--messages", "20", "--rounds", "1", "--calls", "1")
    assert "| 20-message chat, Arabic script |" in out
    assert "| 50 short messages |" in out
