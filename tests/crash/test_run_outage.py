"""PostgreSQL restarted under running workers: every run finishes, nothing is lost or repeated.

A private embedded Postgres (its own data directory, so stopping it touches no one else)
holds the runs of a four-step graph whose every step is an `@effect` POSTing to a real HTTP
receiver in this process (`tests/receivers.py`: it acts on every request and does not
dedupe; the effects' reconcile hooks ask it by key). Two worker processes
(`outage_worker.py`) run them. The order of events is driven by state, never by sleeps:

1. the receiver answers the first requests, then holds every request open: both workers
   are inside an effect call, with steps of their runs already committed (read in the
   database: a running run at step >= 1);
2. the committed checkpoints are noted, and the server is stopped;
3. the held requests are answered while the server is down: each worker now has to record
   an effect's result without a database; the test waits until each worker has logged
   that its connection was lost;
4. the server is started again on the same data directory.

Then: every run succeeds with the workers still alive (a worker that died with a raw
psycopg error is a failure), both still take runs created after the outage (their LISTEN
connection died with the server), every checkpoint committed before the outage is still there,
each thread's checkpoint chain is one line (steps -1..4, each parent the one before), and
the receiver acted exactly once per effect key.
"""

from __future__ import annotations

import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from receivers import Receiver, receiver

from langgraph_durable import DurablePostgresSaver, RunRegistry
from langgraph_durable.embedded import EmbeddedPostgres, start_embedded_postgres

WORKER = Path(__file__).with_name("outage_worker.py")
ROOT = Path(__file__).resolve().parents[2]
RUNS = 6
ANSWERED_BEFORE_HOLDING = 6  # requests answered before the receiver starts holding them
HANG_GUARD_S = 240  # a correct run never gets near this

pytestmark = pytest.mark.crash


@pytest.fixture
def data_dir() -> Iterator[Path]:
    # Not pytest's tmp_path: as root, pgserver opens up the parents of its data dir.
    path = Path(tempfile.mkdtemp(prefix="langgraph-durable-pg-outage-"))
    try:
        yield path / "pgdata"
    finally:
        shutil.rmtree(path, ignore_errors=True)


class WorkerProcess:
    """A worker subprocess whose stderr is read line by line as it comes."""

    def __init__(self, dsn: str, url: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, str(WORKER), dsn, url, "--lease", "2"],
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: list[str] = []
        self.new_lines: queue.Queue[str] = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.lines.append(line)
            self.new_lines.put(line)

    def wait_for_line(self, *needles: str, timeout: float) -> str:
        """The next stderr line holding one of `needles` (lines seen before are skipped)."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            assert left > 0, f"no line with {needles} from the worker:\n{self.log()}"
            try:
                line = self.new_lines.get(timeout=left)
            except queue.Empty:
                continue
            if any(needle in line for needle in needles):
                return line

    def drain(self) -> None:
        while not self.new_lines.empty():
            self.new_lines.get_nowait()

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            code = self.process.wait(60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            code = self.process.wait()
        self._reader.join(10)
        return code

    def log(self) -> str:
        return "".join(self.lines[-60:])


def query(dsn: str, statement: str, *params: Any) -> list[tuple[Any, ...]]:
    with psycopg.connect(dsn, autocommit=True, connect_timeout=5) as conn:
        return conn.execute(statement, params).fetchall()


def wait_until(
    what: str, check: Any, workers: list[WorkerProcess], timeout: float = HANG_GUARD_S
) -> Any:
    """Poll `check()` until it returns something truthy (a hang guard, not a timing);
    fails at once when a worker has died."""
    deadline = time.monotonic() + timeout
    while True:
        found = check()
        if found:
            return found
        dead = [w for w in workers if w.process.poll() is not None]
        assert not dead, f"a worker died while waiting for {what}:\n{dead[0].log()}"
        logs = "\n---\n".join(w.log() for w in workers)
        assert time.monotonic() < deadline, f"gave up waiting for {what}; worker logs:\n{logs}"
        time.sleep(0.05)  # a poll interval, not a synchronisation


def committed(dsn: str) -> set[tuple[str, str, str | None, int]]:
    rows = query(
        dsn,
        "SELECT thread_id, checkpoint_id, parent_checkpoint_id, (metadata ->> 'step')::int "
        "FROM checkpoints WHERE checkpoint_ns = ''",
    )
    return {(t, c, p, s) for t, c, p, s in rows}


def statuses(dsn: str) -> dict[str, int]:
    try:
        rows = query(dsn, "SELECT status, count(*) FROM langgraph_durable_runs GROUP BY status")
    except psycopg.OperationalError:
        return {}
    return {status: int(n) for status, n in rows}


def create_runs(dsn: str, url: str, orders: range) -> list[str]:
    import outage_worker  # tests/crash is on sys.path under pytest

    with DurablePostgresSaver.from_conn_string(dsn) as saver:
        saver.setup()
        graph = outage_worker.build(saver, url)
        runs = RunRegistry(saver)
        return [runs.create(graph, {"order_id": f"s-{i}"}).run_id for i in orders]


def held(rec: Receiver) -> bool:
    return rec.requests >= ANSWERED_BEFORE_HOLDING + 2


def test_workers_survive_a_postgres_restart_mid_run(data_dir: Path) -> None:
    pg: EmbeddedPostgres = start_embedded_postgres(data_dir)
    workers: list[WorkerProcess] = []
    try:
        dsn = pg.dsn
        with receiver() as rec:
            run_ids = create_runs(dsn, rec.url, range(RUNS))
            rec.script = ["ok"] * ANSWERED_BEFORE_HOLDING
            rec.mode = "hang"
            workers = [WorkerProcess(dsn, rec.url) for _ in range(2)]

            # 1. Both workers are inside an effect call (one request held each), and steps
            #    of the runs they hold are committed.
            wait_until("both workers to be inside an effect call", lambda: held(rec), workers)
            running = query(
                dsn, "SELECT run_id, step FROM langgraph_durable_runs WHERE status = 'running'"
            )
            assert len(running) == 2, running
            assert max(step or -1 for _, step in running) >= 1, running
            before = committed(dsn)

            # 2. The server stops (a fast shutdown: every session is terminated).
            for worker in workers:
                worker.drain()
            pg.stop()
            # 3. The held calls return while the database is down.
            rec.mode = "ok"
            rec.release()
            for worker in workers:
                worker.wait_for_line("connection lost", "cannot be reached", timeout=120)
            # 4. The server comes back on the same data directory (same socket, same DSN).
            pg = start_embedded_postgres(data_dir)
            assert pg.dsn == dsn

            wait_until("every run to succeed", lambda: statuses(dsn) == {"success": RUNS}, workers)
            # The workers still take new runs (each has been idle, listening, since).
            run_ids += create_runs(dsn, rec.url, range(RUNS, RUNS + 2))
            wait_until(
                "the runs made after the outage to succeed",
                lambda: statuses(dsn) == {"success": RUNS + 2},
                workers,
            )
            codes = [w.stop() for w in workers]
            logs = [w.log() for w in workers]
            assert codes == [0, 0], logs
            assert not any("Traceback" in log for log in logs), logs

            after = committed(dsn)
            assert before <= after, "a checkpoint committed before the outage was lost"
            by_thread: dict[str, list[tuple[str, str | None, int]]] = {}
            for thread, checkpoint, parent, step in after:
                by_thread.setdefault(thread, []).append((checkpoint, parent, step))
            assert len(by_thread) == RUNS + 2
            for thread, chain in by_thread.items():
                chain.sort()
                assert [step for _, _, step in chain] == [-1, 0, 1, 2, 3, 4], thread
                parents = [parent for _, parent, _ in chain]
                assert parents == [None] + [c for c, _, _ in chain[:-1]], thread

            keys = {a["key"] for a in rec.acted}
            assert len(keys) == (RUNS + 2) * 4
            repeated = {k: rec.count(k) for k in keys if rec.count(k) != 1}
            assert not repeated, f"effects repeated at the receiver: {repeated}"
            outputs = query(
                dsn,
                "SELECT run_id, attempt FROM langgraph_durable_runs WHERE run_id = ANY(%s)",
                run_ids,
            )
            lost = sum(1 for w in workers for line in w.lines if "connection lost" in line)
            print(
                f"outage: {len(before)} checkpoints committed before it, {len(after)} after; "
                f"executions {sum(a for _, a in outputs)} for {RUNS + 2} runs; "
                f"{lost} lost connections logged; receiver requests {rec.requests}"
            )
    finally:
        for worker in workers:
            worker.stop()
        pg.stop()


def test_a_worker_gives_up_after_database_timeout_with_a_named_error(
    fresh_db_dsn: str,
) -> None:
    """A saver on one connection never reconnects: the outage never ends, the worker gives
    up after `database_timeout` with `DatabaseUnreachableError`, never showing a password."""
    import outage_worker

    from langgraph_durable import DatabaseUnreachableError, Worker

    info = psycopg.conninfo.conninfo_to_dict(fresh_db_dsn)
    secret = "s3cret-never-shown"
    with psycopg.connect(
        psycopg.conninfo.make_conninfo("", **{**info, "password": secret}),
        autocommit=True,
        row_factory=psycopg.rows.dict_row,
    ) as conn:
        saver = DurablePostgresSaver(conn)
        saver.setup()
        worker = Worker(
            saver,
            [outage_worker.build(saver, "http://127.0.0.1:9")],
            idle_wait=0.2,
            database_timeout=0.5,
        )
        pid = conn.info.backend_pid
        query(fresh_db_dsn, "SELECT pg_terminate_backend(%s)", pid)
        with pytest.raises(DatabaseUnreachableError, match="could not reach the database") as err:
            worker.run_forever()
    assert secret not in str(err.value)
    assert "database_timeout" in str(err.value)


def test_run_until_idle_names_a_lost_database(fresh_db_dsn: str) -> None:
    """`run_until_idle` does not wait outages out: it says so, by name."""
    import outage_worker

    from langgraph_durable import DatabaseUnreachableError, Worker

    with psycopg.connect(fresh_db_dsn, autocommit=True, row_factory=psycopg.rows.dict_row) as conn:
        saver = DurablePostgresSaver(conn)
        saver.setup()
        worker = Worker(saver, [outage_worker.build(saver, "http://127.0.0.1:9")])
        query(fresh_db_dsn, "SELECT pg_terminate_backend(%s)", conn.info.backend_pid)
        with pytest.raises(DatabaseUnreachableError, match="lost the database"):
            worker.run_until_idle()
