"""Effects across real crashes: what the outside world sees (invariants I1-I3).

A worker (`effect_worker.py`) runs fetch -> create_deal -> notify -> done, where
create_deal calls the "crm" (honours the idempotency key: the key is the deal's UNIQUE
`external_id`) and notify calls the "mailer" (does not: every call is a new mail). The
worker is SIGKILLed at one of four points of one effect call, then a NEW process resumes the
thread: `invoke(None)`, or, when nothing was checkpointed (always under "exit"), the same
input again. The default effect key must come out the same either way.

    kill point    where the process dies                       receiver saw the call?
    after_claim   journal row committed, before the call       no
    during        receiver committed, effect not yet returned  yes
    after_call    effect returned, result not committed        yes
    after_result  result committed, node not finished          yes

What must hold after the resume, in every durability mode:

- crm with `retry="idempotent"`: exactly one deal (the receiver may be called twice).
- crm with a `reconcile=` hook: exactly one deal and one call; when the receiver had acted,
  the journal row is completed with resolved_by='reconcile'.
- mailer, default policy, no hook: the resume stops with `EffectOutcomeUnknown` and the row
  is `unknown`; mails are what the receiver saw (0 or 1); an operator checks the mailer by
  key, resolves the row, and one more resume finishes with exactly one mail.
- after_result: the stored result is replayed; nobody is called again.

Effect leases are 300 s: a resume can only get past a dead attempt at once by seeing that
its owner process is gone (`owner_is_dead`); waiting for the lease would time out.

The scenarios are independent threads of the same database, so the module starts every
selected one up front, a few at a time (each worker is a fresh Python process that spends
most of its second importing), and each test waits for its own.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg.rows import dict_row

from langgraph_durable import EffectJournal

WORKER = Path(__file__).with_name("effect_worker.py")
ROOT = Path(__file__).resolve().parents[2]

CRM_EFFECT = "crash.crm.create_deal"
MAILER_EFFECT = "crash.mailer.send"
EXIT_EMPTY_INPUT = 3
EXIT_OUTCOME_UNKNOWN = 4
KILLED = -signal.SIGKILL

KILLS = ["after_claim", "during", "after_call", "after_result"]
# (durability, flavor): the sync saver in every mode, the async saver with async effects.
RUNS = [
    pytest.param("sync", "sync", id="sync-syncsaver"),
    pytest.param("async", "sync", id="async-syncsaver"),
    pytest.param("exit", "sync", id="exit-syncsaver"),
    pytest.param("sync", "async", id="sync-asyncsaver"),
]
PARALLEL = 4

pytestmark = pytest.mark.crash


@dataclass(frozen=True)
class Done:
    code: int
    stdout: str


@dataclass(frozen=True)
class Run:
    """One thread run by worker processes, one after another."""

    dsn: str
    thread: str
    mode: str
    flavor: str
    crm: str = "idempotent"

    def worker(
        self,
        *,
        resume: bool = False,
        crash_at: str | None = None,
        crash_after: int = 0,
        kill_during: str | None = None,
    ) -> Done:
        env = {k: v for k, v in os.environ.items() if not k.startswith("LANGGRAPH_DURABLE_CRASH")}
        env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
        if crash_at:
            env["LANGGRAPH_DURABLE_CRASH_AT"] = crash_at
            env["LANGGRAPH_DURABLE_CRASH_AFTER"] = str(crash_after)
        cmd = [sys.executable, str(WORKER), self.dsn, self.thread, self.mode, self.flavor]
        cmd += ["--crm", self.crm]
        if resume:
            cmd.append("--resume")
        if kill_during:
            cmd += ["--kill-during", kill_during]
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
        if done.returncode not in (0, EXIT_EMPTY_INPUT, EXIT_OUTCOME_UNKNOWN, KILLED):
            raise AssertionError(f"worker failed ({done.returncode}):\n{done.stderr}")
        return Done(done.returncode, done.stdout)

    def kill(self, receiver: str, point: str) -> int:
        """Run from the start and die at `point` of the effect calling `receiver`.

        create_deal's effect passes each runner crash point first, notify's second.
        """
        if point == "during":
            return self.worker(kill_during=receiver).code
        after = 0 if receiver == "crm" else 1
        return self.worker(crash_at=f"effect:{point}", crash_after=after).code

    def resume(self) -> tuple[Done, bool]:
        """Resume in a new process; send the input again if nothing was checkpointed."""
        done = self.worker(resume=True)
        if done.code != EXIT_EMPTY_INPUT:
            return done, False
        return self.worker(), True


def new_run(dsn: str, mode: str, flavor: str, crm: str = "idempotent") -> Run:
    return Run(dsn, f"fx-crash-{uuid.uuid4()}", mode, flavor, crm)


@dataclass(frozen=True)
class World:
    """What the receivers saw for a thread, and its journal rows by effect name."""

    deals: list[dict[str, Any]]
    mails: list[dict[str, Any]]
    calls: Counter[str]
    journal: dict[str, dict[str, Any]]


def look(dsn: str, thread: str) -> World:
    with psycopg.connect(dsn, autocommit=True, row_factory=dict_row) as conn:
        deals = conn.execute(
            "SELECT id, external_id FROM crm_deals WHERE thread_id = %s ORDER BY id", (thread,)
        ).fetchall()
        mails = conn.execute(
            "SELECT id, key FROM mails WHERE thread_id = %s ORDER BY id", (thread,)
        ).fetchall()
        calls = conn.execute(
            "SELECT receiver FROM receiver_calls WHERE thread_id = %s", (thread,)
        ).fetchall()
        rows = conn.execute(
            "SELECT effect_name, key, status, attempt, resolved_by, replays,"
            " lease_expires_at > clock_timestamp() + interval '250 seconds' AS lease_live"
            " FROM langgraph_durable_effects WHERE thread_id = %s",
            (thread,),
        ).fetchall()
    names = Counter(row["effect_name"] for row in rows)
    # One row per effect: the crash did not change the default key.
    assert all(n == 1 for n in names.values()), rows
    return World(
        deals=deals,
        mails=mails,
        calls=Counter(row["receiver"] for row in calls),
        journal={row["effect_name"]: row for row in rows},
    )


def assert_dead_attempt_left(world: World, effect: str, point: str) -> None:
    """Before the resume: the killed attempt is journaled, its lease still far from expiry."""
    row = world.journal[effect]
    if point == "after_result":
        assert row["status"] == "completed", row
    else:
        assert row["status"] == "running", row
        assert row["lease_live"], row


def final_state(done: Done) -> dict[str, Any]:
    state: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return state


def assert_finished_once(world: World, done: Done) -> None:
    """One deal, one mail, and the final state carries exactly those."""
    assert len(world.deals) == 1, world
    assert len(world.mails) == 1, world
    deal, mail = world.deals[0], world.mails[0]
    assert deal["external_id"] == world.journal[CRM_EFFECT]["key"]
    assert mail["key"] == world.journal[MAILER_EFFECT]["key"]
    state = final_state(done)
    assert state["deal"] == {"deal_id": deal["id"], "external_id": deal["external_id"]}
    assert state["mail"] == {"mail_id": mail["id"]}
    assert state["log"][-1] == "done"
    assert all(row["status"] == "completed" for row in world.journal.values()), world


# -- scenarios (run ahead in threads; each raises AssertionError on a broken claim) --------

# (crm policy, kill point) -> (receiver calls, journal attempt, resolved_by) after resume
CRM_EXPECTED: dict[tuple[str, str], tuple[int, int, str | None]] = {
    ("idempotent", "after_claim"): (1, 2, None),
    ("idempotent", "during"): (2, 2, None),  # called again with the same key: same deal
    ("idempotent", "after_call"): (2, 2, None),
    ("idempotent", "after_result"): (1, 1, None),
    ("reconcile", "after_claim"): (1, 2, None),  # hook found nothing: attempted again
    ("reconcile", "during"): (1, 1, "reconcile"),
    ("reconcile", "after_call"): (1, 1, "reconcile"),
    ("reconcile", "after_result"): (1, 1, None),
}


def crm_scenario(dsn: str, mode: str, flavor: str, crm: str, kill: str) -> None:
    run = new_run(dsn, mode, flavor, crm)
    assert run.kill("crm", kill) == KILLED
    reached = kill != "after_claim"
    seen = look(dsn, run.thread)
    assert (len(seen.deals), seen.calls["crm"]) == (int(reached), int(reached)), seen
    assert_dead_attempt_left(seen, CRM_EFFECT, kill)
    assert MAILER_EFFECT not in seen.journal

    done, resent = run.resume()
    assert done.code == 0, done
    if mode == "exit":
        assert resent, "exit mode checkpointed nothing: the input had to be sent again"
    after = look(dsn, run.thread)
    assert_finished_once(after, done)
    calls, attempt, resolved_by = CRM_EXPECTED[crm, kill]
    row = after.journal[CRM_EFFECT]
    assert (after.calls["crm"], row["attempt"], row["resolved_by"]) == (
        calls,
        attempt,
        resolved_by,
    ), (after, row)
    assert after.calls["mailer"] == 1
    if kill == "after_result":
        assert row["replays"] == 1, row


def mailer_scenario(dsn: str, mode: str, flavor: str, kill: str) -> None:
    run = new_run(dsn, mode, flavor)
    assert run.kill("mailer", kill) == KILLED
    reached = kill != "after_claim"
    seen = look(dsn, run.thread)
    assert (len(seen.mails), seen.calls["mailer"]) == (int(reached), int(reached)), seen
    assert_dead_attempt_left(seen, MAILER_EFFECT, kill)

    first, resent = run.resume()
    if mode == "exit":
        assert resent, "exit mode checkpointed nothing: the input had to be sent again"
    if kill == "after_result":
        assert first.code == 0, first  # replayed: no second mail, no question asked
        done = first
    else:
        assert first.code == EXIT_OUTCOME_UNKNOWN, first
        found = re.search(r"unknown-key: (\S+)", first.stdout)
        assert found is not None, first
        key = found.group(1)
        stuck = look(dsn, run.thread)
        assert key == stuck.journal[MAILER_EFFECT]["key"]
        assert stuck.journal[MAILER_EFFECT]["status"] == "unknown", stuck
        assert stuck.mails == seen.mails  # nothing was sent while unsure
        assert stuck.calls == seen.calls
        # The operator asks the mailer by key and says what happened.
        with psycopg.connect(dsn, autocommit=True, row_factory=dict_row) as conn:
            sent = conn.execute("SELECT id FROM mails WHERE key = %s", (key,)).fetchall()
            journal = EffectJournal(conn)
            if sent:
                journal.resolve(key, completed={"mail_id": sent[0]["id"]})
            else:
                journal.resolve(key, allow_retry=True)
        done, resent = run.resume()
        assert done.code == 0, done
        # Stopping on an error saved a checkpoint in every mode ("exit" saves on the way
        # out): resume means invoke(None) now. Sending the input again would start a new
        # run at later steps, with new default keys: a second deal and a second mail.
        assert not resent
    after = look(dsn, run.thread)
    assert_finished_once(after, done)
    assert after.calls == Counter({"crm": 1, "mailer": 1}), after
    row = after.journal[MAILER_EFFECT]
    if kill == "after_claim":
        assert row["attempt"] == 2, row  # retried after the operator allowed it
    elif kill == "after_result":
        assert (row["attempt"], row["resolved_by"], row["replays"]) == (1, None, 1), row
    else:
        assert (row["attempt"], row["resolved_by"]) == (1, "operator"), row


SCENARIOS: dict[str, Callable[..., None]] = {
    "test_crm_gets_exactly_one_deal": crm_scenario,
    "test_mailer_never_sends_twice": mailer_scenario,
}


class Ahead:
    """The futures of the scenarios started ahead, by test node id."""

    def __init__(self, dsn: str, baseline: tuple[Run, Done]) -> None:
        self.dsn = dsn
        self.baseline = baseline
        self.futures: dict[str, Future[None]] = {}

    def check(self, request: pytest.FixtureRequest) -> None:
        node = request.node
        assert isinstance(node, pytest.Function)
        future = self.futures.get(node.nodeid)
        if future is None:  # not scheduled (should not happen): run it here
            SCENARIOS[node.originalname](self.dsn, **node.callspec.params)
            return
        future.result()


@pytest.fixture(scope="module")
def ahead(request: pytest.FixtureRequest, db_dsn: str) -> Iterator[Ahead]:
    # One clean run first (the baseline test): it creates the receiver tables and the
    # schema before the crowd arrives.
    run = new_run(db_dsn, "sync", "sync")
    found = Ahead(db_dsn, (run, run.worker()))
    pool = ThreadPoolExecutor(max_workers=PARALLEL, thread_name_prefix="crash-scenario")
    for item in request.session.items:
        if not isinstance(item, pytest.Function) or item.module is not request.module:
            continue
        scenario = SCENARIOS.get(item.originalname)
        if scenario is not None:
            found.futures[item.nodeid] = pool.submit(scenario, db_dsn, **item.callspec.params)
    try:
        yield found
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def test_without_a_crash_each_receiver_is_called_once(ahead: Ahead) -> None:
    run, done = ahead.baseline
    assert done.code == 0, done
    world = look(run.dsn, run.thread)
    assert_finished_once(world, done)
    assert world.calls == Counter({"crm": 1, "mailer": 1})


@pytest.mark.parametrize(("mode", "flavor"), RUNS)
@pytest.mark.parametrize("crm", ["idempotent", "reconcile"])
@pytest.mark.parametrize("kill", KILLS)
def test_crm_gets_exactly_one_deal(
    ahead: Ahead, request: pytest.FixtureRequest, mode: str, flavor: str, crm: str, kill: str
) -> None:
    """Killed in the crm's effect: one deal per run at every point, in every mode."""
    ahead.check(request)


@pytest.mark.parametrize(("mode", "flavor"), RUNS)
@pytest.mark.parametrize("kill", KILLS)
def test_mailer_never_sends_twice(
    ahead: Ahead, request: pytest.FixtureRequest, mode: str, flavor: str, kill: str
) -> None:
    """Killed in the mailer's effect: unknown outcome, operator resolves, one mail."""
    ahead.check(request)
