"""Where the run registry's commits go: per run, by table, with 1 and 16 worker processes.

    python benchmarks/registry_commits.py --dsn postgresql://postgres@127.0.0.1:5432/postgres
    python benchmarks/registry_commits.py --workers 1 4 16 --runs 96

For each number of workers: a scratch database, `RUNS` runs of the 10-node graph taken by
that many worker processes (`bench_runs.py`'s registry measurement), then per run: the
database's `xact_commit` and `sessions` deltas and each table's inserted, updated and
deleted rows (`pg_stat_user_tables`). Rows written per run that stay the same while
commits grow mean the growth is transactions that write nothing: sessions starting, or
sessions woken by a NOTIFY (Postgres wakes every listening session of the database for each
one, whatever its channel, and each wake is a transaction).
"""

from __future__ import annotations

import argparse
import sys
import uuid
from typing import Any

import psycopg
from bench_runs import _commits, _registry
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from langgraph_durable import DurablePostgresSaver

Counts = dict[str, tuple[int, int, int]]


def _stats(server_dsn: str, dsn: str) -> tuple[Counts, int, int]:
    dbname = str(conninfo_to_dict(dsn)["dbname"])
    _commits(server_dsn, dbname)  # until no connection is left, so the counts are flushed
    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT relname, n_tup_ins, n_tup_upd, n_tup_del FROM pg_stat_user_tables"
        ).fetchall()
    with psycopg.connect(server_dsn, autocommit=True) as conn:
        found = conn.execute(
            "SELECT xact_commit, sessions FROM pg_stat_database WHERE datname = %s", (dbname,)
        ).fetchone()
    assert found is not None
    return {r[0]: (r[1], r[2], r[3]) for r in rows}, int(found[0]), int(found[1])


def measure(server_dsn: str, workers: int, runs: int) -> dict[str, Any]:
    """Commits, sessions and rows written per run with `workers` worker processes."""
    name = f"lgd_bench_commits_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(server_dsn, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    dsn = make_conninfo(server_dsn, dbname=name)
    try:
        with DurablePostgresSaver.from_conn_string(dsn) as saver:
            saver.setup()
        tables_before, commits_before, sessions_before = _stats(server_dsn, dsn)
        _registry(server_dsn, dsn, workers, runs, 30.0, 5.0)
        tables_after, commits_after, sessions_after = _stats(server_dsn, dsn)
    finally:
        with psycopg.connect(server_dsn, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    tables = {
        table: tuple(
            (after - before) / runs
            for after, before in zip(counts, tables_before.get(table, (0, 0, 0)), strict=True)
        )
        for table, counts in tables_after.items()
    }
    return {
        "commits": (commits_after - commits_before) / runs,
        "sessions": sessions_after - sessions_before,
        "tables": {t: v for t, v in sorted(tables.items()) if any(v)},
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dsn", default="postgresql://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 16])
    parser.add_argument("--runs", type=int, default=48)
    args = parser.parse_args()
    for workers in args.workers:
        print(f"{workers} workers, {args.runs} runs ...", file=sys.stderr, flush=True)
        found = measure(args.dsn, workers, args.runs)
        print(
            f"{workers} workers: {found['commits']:.2f} commits per run, "
            f"{found['sessions']} sessions"
        )
        for table, (ins, upd, dele) in found["tables"].items():
            print(f"  {table:32s} inserted {ins:6.2f}  updated {upd:6.2f}  deleted {dele:6.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
