"""Two processes race for one thread: exactly one advances it, and its chain never forks.

Two contender processes (`race_worker.py`) wait at a barrier made of a Postgres advisory
lock that the test holds; once `pg_locks` shows both waiting, the test lets go and both
start at the same moment (no sleeps anywhere).

- A run whose worker died: claimed by "a worker that died", advanced two steps under its
  fencing token, its lease then expired in the database. Both contenders claim it at once,
  `ROUNDS` times (50; `LANGGRAPH_DURABLE_RACE_ROUNDS` for more): each time exactly one
  takes it and finishes it, the other gets nothing; the thread's checkpoints are one line
  (each checkpoint's parent is the one before, one checkpoint per step, steps -1..4); and
  the dead worker, writing again with its old token, is refused without a trace.
- Two plain `graph.invoke(None, config)` calls on one thread under `RunRegistry.exclusive`:
  the one that gets the lease runs (its node waits at a second barrier until the other has
  answered), the other gets `ThreadBusyError`.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
import pytest

from langgraph_durable import DurablePostgresSaver, FencedOutError, RunRegistry, RunStatus
from langgraph_durable._fencing import Fence, with_fence

CONTENDER = Path(__file__).with_name("race_worker.py")
ROOT = Path(__file__).resolve().parents[2]
ROUNDS = int(os.environ.get("LANGGRAPH_DURABLE_RACE_ROUNDS", "50"))
EXCLUSIVE_ROUNDS = 5
HANG_GUARD_S = 120  # per wait; a correct run never gets near it

pytestmark = pytest.mark.crash


class Contender:
    """A contender process; its JSON answers go to a queue shared by all contenders."""

    def __init__(self, index: int, dsn: str, name: str, answers: queue.Queue[Any]) -> None:
        self.index = index
        self.process = subprocess.Popen(
            [sys.executable, str(CONTENDER), dsn, name],
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.errors: list[str] = []
        self._answers = answers
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._read_errors, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self._answers.put((self.index, json.loads(line)))
        self._answers.put((self.index, None))  # the process ended

    def _read_errors(self) -> None:
        assert self.process.stderr is not None
        self.errors.extend(self.process.stderr)

    def send(self, command: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(command + "\n")
        self.process.stdin.flush()

    def stop(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


@contextmanager
def contenders(dsn: str, name: str) -> Iterator[tuple[list[Contender], queue.Queue[Any]]]:
    answers: queue.Queue[Any] = queue.Queue()
    found = [Contender(i, dsn, name, answers) for i in range(2)]
    try:
        for _ in found:
            assert next_answer(answers, found)[1] == {"ready": True}
        yield found, answers
    finally:
        for contender in found:
            contender.stop()


def next_answer(answers: queue.Queue[Any], found: list[Contender]) -> tuple[int, Any]:
    try:
        index, answer = answers.get(timeout=HANG_GUARD_S)
    except queue.Empty:
        pytest.fail("no answer from the contenders: " + "".join(found[0].errors[-20:]))
    assert answer is not None, "a contender died:\n" + "".join(found[index].errors[-40:])
    return index, answer


def wait_for_waiters(conn: psycopg.Connection[Any], key: int, count: int) -> None:
    """Poll `pg_locks` until `count` sessions wait for advisory lock `key` (a hang guard)."""
    deadline = time.monotonic() + HANG_GUARD_S
    while True:
        row = conn.execute(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted "
            "AND classid = 0 AND objid::text::bigint = %s AND objsubid = 1 "
            "AND database = (SELECT oid FROM pg_database WHERE datname = current_database())",
            (key,),
        ).fetchone()
        if row is not None and row[0] >= count:
            return
        assert time.monotonic() < deadline, f"contenders never reached barrier {key}"
        time.sleep(0.005)  # a poll interval, not a synchronisation


def chain_of(conn: psycopg.Connection[Any], thread_id: str) -> list[tuple[str, str | None, int]]:
    rows = conn.execute(
        "SELECT checkpoint_id, parent_checkpoint_id, (metadata ->> 'step')::int FROM checkpoints "
        "WHERE thread_id = %s AND checkpoint_ns = '' ORDER BY checkpoint_id",
        (thread_id,),
    ).fetchall()
    return [(c, p, s) for c, p, s in rows]


def assert_one_line(chain: list[tuple[str, str | None, int]]) -> None:
    """One checkpoint per step, -1..4, each the child of the one before: no fork."""
    assert [step for _, _, step in chain] == [-1, 0, 1, 2, 3, 4]
    assert [parent for _, parent, _ in chain] == [None] + [c for c, _, _ in chain[:-1]]


def test_two_workers_race_for_an_expired_run_and_exactly_one_advances_it(
    fresh_db_dsn: str,
) -> None:
    import race_worker  # tests/crash is on sys.path under pytest

    wins = [0, 0]
    overlapping = 0
    with (
        DurablePostgresSaver.from_conn_string(fresh_db_dsn) as saver,
        psycopg.connect(fresh_db_dsn, autocommit=True) as control,
    ):
        saver.setup()
        graph = race_worker.build(saver, fresh_db_dsn, "race")
        runs = RunRegistry(saver)
        with contenders(fresh_db_dsn, "race") as (found, answers):
            for round_ in range(ROUNDS):
                run = runs.create(graph, {"log": []})
                dead = runs.claim([graph], owner="a-worker-that-died", lease_seconds=60)
                assert dead is not None
                assert dead.run_id == run.run_id
                # The dead worker got as far as node "c" (steps -1..2 committed) ...
                stale = with_fence(
                    {
                        "configurable": {"thread_id": run.thread_id},
                        "metadata": {"run_id": run.run_id},
                    },
                    Fence(int(dead.fencing_token or 0), run.run_id),
                )
                graph.graph.invoke({"log": []}, stale, interrupt_before=["c"])
                # ... and its lease ran out.
                control.execute(
                    "UPDATE langgraph_durable_runs SET lease_expires_at = now() - interval '1s' "
                    "WHERE run_id = %s",
                    (run.run_id,),
                )
                control.execute(
                    "UPDATE langgraph_durable_threads SET lease_expires_at = "
                    "now() - interval '1s' WHERE thread_id = %s",
                    (run.thread_id,),
                )
                before = chain_of(control, run.thread_id)
                assert [s for _, _, s in before] == [-1, 0, 1, 2]

                key = 10_000 + round_
                control.execute("SELECT pg_advisory_lock(%s)", (key,))
                for contender in found:
                    contender.send(f"claim {key}")
                wait_for_waiters(control, key, 2)
                control.execute("SELECT pg_advisory_unlock(%s)", (key,))
                got = dict(next_answer(answers, found) for _ in found)

                winners = [i for i, answer in got.items() if answer["won"]]
                assert len(winners) == 1, got
                (winner,) = winners
                assert got[winner]["won"] == run.run_id
                assert got[winner]["status"] == "success"
                wins[winner] += 1
                (start_a, end_a), (start_b, end_b) = got[0]["claim"], got[1]["claim"]
                overlapping += max(start_a, start_b) < min(end_a, end_b)

                finished = runs.get(run.run_id)
                assert (finished.status, finished.attempt) == (RunStatus.SUCCESS, 2)
                assert runs.output_of(finished) == {"log": ["a", "b", "c", "d"]}
                chain = chain_of(control, run.thread_id)
                assert chain[:4] == before  # the dead worker's steps were kept, not redone
                assert_one_line(chain)
                # The dead worker wakes up and goes on from where it was (its last
                # checkpoint, before "c"), which would fork the chain: refused.
                where_it_was = {
                    **stale,
                    "configurable": {**stale["configurable"], "checkpoint_id": before[-1][0]},
                }
                with pytest.raises(FencedOutError):
                    graph.graph.invoke(None, where_it_was)
                assert chain_of(control, run.thread_id) == chain
    print(
        f"{ROUNDS} races: contender 0 won {wins[0]}, contender 1 won {wins[1]}; "
        f"their claims were in flight together in {overlapping}"
    )
    assert sum(wins) == ROUNDS
    assert overlapping > 0, "the claims never overlapped: the test raced nothing"


def test_two_processes_invoking_one_thread_one_runs_the_other_is_busy(
    fresh_db_dsn: str,
) -> None:
    import race_worker

    with (
        DurablePostgresSaver.from_conn_string(fresh_db_dsn) as saver,
        psycopg.connect(fresh_db_dsn, autocommit=True) as control,
    ):
        saver.setup()
        graph = race_worker.build(saver, fresh_db_dsn, "plain")
        runs = RunRegistry(saver)
        with contenders(fresh_db_dsn, "plain") as (found, answers):
            for round_ in range(EXCLUSIVE_ROUNDS):
                thread = f"plain-{round_}"
                # A thread stopped before node "c" (as after a crash): both resume it.
                with runs.exclusive(thread) as config:
                    graph.graph.invoke({"log": []}, config, interrupt_before=["c"])
                key, hold = 20_000 + round_, 30_000 + round_
                control.execute("SELECT pg_advisory_lock(%s), pg_advisory_lock(%s)", (key, hold))
                for contender in found:
                    contender.send(f"exclusive {key} {thread} {hold}")
                wait_for_waiters(control, key, 2)
                control.execute("SELECT pg_advisory_unlock(%s)", (key,))

                # The one that got the lease waits inside node "c" (at barrier `hold`), so
                # the other's answer comes first, whatever the scheduling.
                loser, refused = next_answer(answers, found)
                assert "held by another process" in refused.get("busy", ""), refused
                wait_for_waiters(control, hold, 1)
                lease = control.execute(
                    "SELECT owner IS NOT NULL FROM langgraph_durable_threads WHERE thread_id = %s",
                    (thread,),
                ).fetchone()
                assert lease == (True,)
                control.execute("SELECT pg_advisory_unlock(%s)", (hold,))
                winner, ran = next_answer(answers, found)
                assert winner != loser
                assert ran == {"ran": True, "log": ["a", "b", "c", "d"]}

                assert_one_line(chain_of(control, thread))
                released = control.execute(
                    "SELECT owner FROM langgraph_durable_threads WHERE thread_id = %s", (thread,)
                ).fetchone()
                assert released == (None,)
