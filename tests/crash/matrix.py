"""The crash matrix: both example workflows killed or cut off at every named point, then resumed.

    python tests/crash/matrix.py --trials 300 --write docs/reliability.md   # the long mode
    python tests/crash/matrix.py --trials 20                                # a quick look

A trial is one thread of one workflow, in one durability mode, with one saver class, and one
fault at one named point (`cells()`):

- `seven` (`examples/seven_step_workflow.py`, resumed by hand as its README says: from the
  checkpoint, else the same input again) and `refund` (`examples/northwind_refund.py` as a
  registry run: workers take it, a manager answers its approval through the registry, a new
  worker recovers it when the first one died);
- a crash: the worker SIGKILLs itself at a point of `langgraph_durable/_crashpoints.py`
  (after the `after`-th pass), or is SIGKILLed from outside before a node (`node:STEP`);
- or a database fault at such a point, after which the same worker goes on: its sessions
  ended by `pg_terminate_backend` (`terminate`), every TCP connection cut by a proxy
  between it and PostgreSQL (`drop`), or the server restarted (`restart`: on a private
  embedded server, one trial at a time; `matrix_proxy.py`).

After the fault, new processes resume until the run finishes; an unknown effect outcome is
resolved the way an operator would (look at the receiver, then `EffectJournal.resolve`).
What the outside world saw is then counted (`Counts`): duplicates at receivers that honour
keys, silent duplicates elsewhere (the mailers), actions never taken, runs unfinished,
approvals lost, and, for information, model calls billed again (the documented policy asks
a model once more when its answer was lost) and errors that reached a caller unnamed.

The suite runs a fixed sample (`tests/crash/test_crash_matrix.py`); this command runs any
number of trials, spread over every cell, and can write the figures into a Markdown file
between the marks `<!-- crash-matrix -->` and `<!-- /crash-matrix -->`.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import psycopg
from matrix_proxy import Proxy, Restarts

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT / "examples"))
sys.path.insert(0, str(ROOT / "tests"))

import northwind_refund  # noqa: E402
import seven_step_workflow  # noqa: E402
from langgraph.types import Command  # noqa: E402

from langgraph_durable import (  # noqa: E402
    DurableError,
    DurablePostgresSaver,
    EffectJournal,
    RunRegistry,
    RunStatus,
)
from langgraph_durable.approvals import ApprovalDecision, answer_for  # noqa: E402
from langgraph_durable.effects import journal_of  # noqa: E402

WORKER = HERE / "matrix_worker.py"
EXIT_OUTCOME_UNKNOWN = 4
KILLED = -signal.SIGKILL
LEASE_S = 2.0
MAX_ROUNDS = 8  # resumes after the fault; a correct run needs at most three
HANG_GUARD_S = 240.0  # a trial that gets near this is reported as unfinished
MODES = ("sync", "async", "exit")
SAVERS = ("sync", "async")
EFFECT_POINTS = ("effect:after_claim", "effect:after_call", "effect:after_result")
SAVER_POINTS = ("put:after_commit", "put_writes:parked", "put_writes:after_commit")
RUN_POINTS = ("run:after_claim", "run:before_finish")
# How many passes a point has in one run, at most (a trial's `after` is drawn below it):
# seven steps make 8 checkpoints and 5 journaled calls (2 model calls, 3 receivers); the
# refund 7 checkpoints, 3 effects and 2 claims (before and after the approval). Under
# "exit" a run saves once, when it ends (the refund: at its approval, and at its end).
PASSES = {"seven": {"put": 8, "effect": 5}, "refund": {"put": 7, "effect": 3, "run": 2}}
EXIT_PUTS = {"seven": 1, "refund": 2}
FAULTS = ("crash", "terminate", "drop", "restart")
MARKS = ("<!-- crash-matrix -->", "<!-- /crash-matrix -->")


@dataclass(frozen=True)
class Trial:
    """One thread, one fault."""

    workflow: str
    mode: str
    saver: str
    point: str
    after: int = 0
    fault: str = "crash"
    journaled: bool = True  # False: the control, effects called bare (matrix_worker.py)

    @property
    def cell(self) -> str:
        return f"{self.workflow} {self.mode} {self.saver}-saver {self.fault} {self.point}"


@dataclass
class Counts:
    """What one or many trials showed; the first five must stay 0, the rest are figures."""

    duplicates_at_key_honouring_receivers: int = 0
    silent_duplicates: int = 0
    actions_missing: int = 0
    runs_unfinished: int = 0
    approvals_lost: int = 0
    trials: int = 0
    faults_struck: int = 0
    model_calls_billed_again: int = 0
    operator_resolutions: int = 0
    unnamed_errors_seen: int = 0
    example_errors_seen: int = 0
    story: list[str] = field(default_factory=list)  # what happened, shown when a trial fails

    def add(self, other: Counts) -> None:
        for f in fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))

    @property
    def failures(self) -> dict[str, int]:
        must_be_zero = [f.name for f in fields(self)][:5]
        return {name: getattr(self, name) for name in must_be_zero if getattr(self, name)}


def cells() -> Iterator[Trial]:
    """Every combination the matrix covers (with `after` 0; `plan` draws it)."""
    for mode in MODES:
        for saver in SAVERS:
            for point in (*SAVER_POINTS, *EFFECT_POINTS):
                for workflow in ("seven", "refund"):
                    yield Trial(workflow, mode, saver, point)
            for step in seven_step_workflow.STEPS:
                yield Trial("seven", mode, saver, f"node:{step}")
            for point in RUN_POINTS:
                yield Trial("refund", mode, saver, point)
            for fault in ("terminate", "drop", "restart"):
                for point in ("put:after_commit", "effect:after_call"):
                    for workflow in ("seven", "refund"):
                        yield Trial(workflow, mode, saver, point, fault=fault)


def plan(trials: int, seed: int) -> list[Trial]:
    """`trials` trials over every cell in turn, each with a random pass of its point."""
    rng = random.Random(seed)
    every = list(cells())
    rng.shuffle(every)
    chosen = []
    for n in range(trials):
        cell = every[n % len(every)]
        kind = cell.point.split(":")[0]
        passes = PASSES[cell.workflow].get(kind, 1)
        if cell.mode == "exit" and kind in ("put", "put_writes"):
            passes = EXIT_PUTS[cell.workflow]
        chosen.append(Trial(**{**cell.__dict__, "after": rng.randrange(passes)}))
    return chosen


def worker_env(trial: Trial, control: str | None = None, *, first: bool = False) -> dict[str, str]:
    """The environment of a worker process: the fault for the trial's first one only."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("LANGGRAPH_DURABLE_CRASH", "MATRIX_"))
    }
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    if not trial.journaled:
        env["MATRIX_CONTROL"] = "bare"
    if first and not trial.point.startswith("node:"):
        env["LANGGRAPH_DURABLE_CRASH_AT"] = trial.point
        env["LANGGRAPH_DURABLE_CRASH_AFTER"] = str(trial.after)
        if trial.fault == "terminate":
            env["MATRIX_FAULT"] = "terminate"
        elif trial.fault in ("drop", "restart"):
            env["MATRIX_FAULT"] = f"{trial.fault}:{control}"
    return env


ERROR_LINE = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception|Unknown|Exit)\w*)(?::|$)")


def last_error(stderr: str) -> str:
    names = [line for line in stderr.splitlines() if ERROR_LINE.match(line)]
    return names[-1][:300] if names else ""


FRAME_LINE = re.compile(r'^\s*File "(?P<path>[^"]+)", line \d+')


def raw_error(stderr: str) -> str | None:
    """Whose raw error a traceback ended with, if it is not one of ours (a `DurableError`):
    "ours" when langgraph-durable's code is the deepest of our package's and the worker's
    own frames (the package let a driver error through unnamed), "theirs" when the
    example's or the harness's own code raised it (e.g. its own connection to the server
    being restarted, for the receivers' bookkeeping)."""
    if "Traceback" not in stderr:
        return None
    last = stderr[stderr.rindex("Traceback") :]
    names = [m.group(1) for line in last.splitlines() if (m := ERROR_LINE.match(line))]
    if not names or names[-1].startswith("langgraph_durable."):
        return None
    own = [
        m.group("path")
        for line in last.splitlines()
        if (m := FRAME_LINE.match(line))
        and ("/langgraph_durable/" in m.group("path") or f"{ROOT}/" in m.group("path"))
        and "/site-packages/" not in m.group("path")
    ]
    return "ours" if own and "/langgraph_durable/" in own[-1] else "theirs"


def unnamed(stderr: str) -> int:
    """1 when langgraph-durable let a raw error reach the worker (`raw_error`)."""
    return raw_error(stderr) == "ours"


def theirs(stderr: str) -> int:
    """1 when the example's or the harness's own code raised a raw error (`raw_error`)."""
    return raw_error(stderr) == "theirs"


def world(dsn: str, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        cur = conn.execute(sql, params)
        return cur.fetchall() if cur.description else []


# -- the seven steps, resumed by hand --------------------------------------------------------


def seven_process(
    dsn: str, world_dsn: str, trial: Trial, thread: str, env: dict[str, str], *, first: bool = False
) -> Any:
    cmd = [sys.executable, str(WORKER), "seven", dsn, thread, trial.mode, trial.saver]
    cmd += ["--world-dsn", world_dsn]
    if first and trial.point.startswith("node:"):
        cmd += ["--stop-before", trial.point.removeprefix("node:")]
    return subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def kill_at_marker(dsn: str, thread: str, proc: Any) -> None:
    """SIGKILL the worker once its node wrote the marker (the example's `--stop-before`)."""
    while proc.poll() is None:
        if world(dsn, "SELECT 1 FROM seven_markers WHERE thread_id = %s", thread):
            proc.kill()
            return
        time.sleep(0.02)


def resolve_seven(journal: EffectJournal, dsn: str, thread: str, key: str) -> None:
    """The operator: the mailer is checked by thread; the others are asked again."""
    row = journal.get(key)
    if row is not None and row.effect_name == "mailer.send":
        sent = world(dsn, "SELECT id FROM seven_notifications WHERE thread_id = %s", thread)
        if sent:
            journal.resolve(key, completed={"notification_id": sent[0][0]})
            return
    journal.resolve(key, allow_retry=True)


def seven_trial(dsn: str, trial: Trial, route: Route, journal: EffectJournal) -> Counts:
    counts = Counts(trials=1)
    thread = f"matrix-{uuid.uuid4().hex[:12]}"
    env = worker_env(trial, route.control, first=True)
    proc = seven_process(route.dsn, dsn, trial, thread, env, first=True)
    if trial.point.startswith("node:"):
        kill_at_marker(dsn, thread, proc)
    out, err = proc.communicate(timeout=HANG_GUARD_S)
    counts.story.append(f"thread {thread}: first worker {proc.pid} exit {proc.returncode}")
    counts.faults_struck += proc.returncode == KILLED or fault_struck(dsn, trial, proc.pid)
    counts.unnamed_errors_seen += unnamed(err)
    counts.example_errors_seen += theirs(err)
    finished = proc.returncode == 0
    for _ in range(MAX_ROUNDS):
        if finished:
            break
        if proc.returncode == EXIT_OUTCOME_UNKNOWN:
            counts.operator_resolutions += 1
            resolve_seven(journal, dsn, thread, out.split("unknown-key: ")[1].strip())
        proc = seven_process(dsn, dsn, trial, thread, worker_env(trial))
        out, err = proc.communicate(timeout=HANG_GUARD_S)
        counts.story.append(f"resumed by {proc.pid}: exit {proc.returncode} {last_error(err)}")
        counts.unnamed_errors_seen += unnamed(err)
        counts.example_errors_seen += theirs(err)
        finished = proc.returncode == 0
    deals, tasks, notes = (
        len(world(dsn, f"SELECT 1 FROM seven_{table} WHERE thread_id = %s", thread))
        for table in ("crm_deals", "crm_tasks", "notifications")
    )
    billed = world(dsn, "SELECT step FROM seven_model_bill WHERE thread_id = %s", thread)
    counts.story.append(f"deals {deals}, tasks {tasks}, notifications {notes}")
    counts.runs_unfinished += not finished
    counts.duplicates_at_key_honouring_receivers += max(0, deals - 1) + max(0, tasks - 1)
    counts.silent_duplicates += max(0, notes - 1)
    counts.actions_missing += finished and (min(deals, tasks, notes) == 0)
    counts.model_calls_billed_again += len(billed) - len({step for (step,) in billed})
    return counts


# -- the refund, as a registry run -----------------------------------------------------------


def refund_worker(dsn: str, world_dsn: str, trial: Trial, graph: str, env: dict[str, str]) -> Any:
    cmd = [sys.executable, str(WORKER), "refund", dsn, graph, trial.mode, trial.saver]
    cmd += ["--lease", str(LEASE_S), "--world-dsn", world_dsn]
    return subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def resolve_refund(journal: EffectJournal, dsn: str, thread: str) -> None:
    """The operator: look for the mail by thread and subject; the payment service by key."""
    for effect in journal.open_effects(thread):
        if effect["status"] != "unknown":
            continue
        subject = {"tell_customer": "%under review", "confirm": "%is done"}.get(effect["node"])
        if subject is None:
            journal.resolve(effect["key"], allow_retry=True)
            continue
        sent = world(
            dsn,
            "SELECT subject FROM northwind_emails WHERE thread_id = %s AND subject LIKE %s",
            thread,
            subject,
        )
        if sent:
            journal.resolve(effect["key"], completed=sent[0][0])
        else:
            journal.resolve(effect["key"], allow_retry=True)


def refund_trial(dsn: str, trial: Trial, route: Route, saver: DurablePostgresSaver) -> Counts:
    counts = Counts(trials=1)
    n = uuid.uuid4().hex[:12]
    graph, thread, order = f"refund_{n}", f"matrix-{n}", f"order-{n}"
    world(dsn, "INSERT INTO northwind_orders VALUES (%s, 'ann@example.com', 1000, 0)", order)
    registry, journal = RunRegistry(saver), sync_journal(saver)
    state_graph = northwind_refund.build(dsn).compile(checkpointer=saver)
    payload = {"thread": thread, "order_id": order, "amount": 420, "log": []}
    run = registry.create(
        graph, payload, version="1", thread_id=thread, durability=trial.mode, max_attempts=50
    )
    workers = [
        refund_worker(route.dsn, dsn, trial, graph, worker_env(trial, route.control, first=True))
    ]
    approved = False
    deadline = time.monotonic() + HANG_GUARD_S
    while time.monotonic() < deadline:
        try:
            run = registry.get(run.run_id)
        except DurableError:  # the server restarts (a `restart` trial): look again
            time.sleep(0.05)
            continue
        if run.status is RunStatus.SUCCESS:
            break
        if not counts.story or counts.story[-1] != f"run {run.status.value}":
            counts.story.append(f"run {run.status.value}")
        if run.status is RunStatus.INTERRUPTED:
            counts.approvals_lost += approved  # answered once already: it must not ask again
            config: Any = {"configurable": {"thread_id": thread}}
            decision = ApprovalDecision(approved=True, approver="manager-ana", comment="ok")
            answer = answer_for(state_graph.get_state(config), thread, decision)
            registry.resume(run.run_id, Command(resume=answer))
            approved = True
        elif run.status in (RunStatus.BLOCKED, RunStatus.ERROR):
            counts.operator_resolutions += 1
            resolve_refund(journal, dsn, thread)
            registry.retry(run.run_id)
        if workers[-1].poll() is not None:
            counts.faults_struck += workers[-1].returncode == KILLED
            err = workers[-1].stderr.read().decode()
            counts.unnamed_errors_seen += unnamed(err)
            counts.example_errors_seen += theirs(err)
            workers.append(refund_worker(dsn, dsn, trial, graph, worker_env(trial)))
        time.sleep(0.05)  # a look at the run's row, not a guess at how long anything takes
    if trial.fault != "crash":
        counts.faults_struck += fault_struck(dsn, trial, workers[0].pid)
    for proc in workers:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        _, raw = proc.communicate(timeout=HANG_GUARD_S)
        if proc.returncode not in (0, KILLED):
            counts.unnamed_errors_seen += unnamed(raw.decode())
            counts.example_errors_seen += theirs(raw.decode())
    payments = len(world(dsn, "SELECT 1 FROM northwind_payments WHERE order_id = %s", order))
    mails = Counter(
        s
        for (s,) in world(dsn, "SELECT subject FROM northwind_emails WHERE thread_id = %s", thread)
    )
    finished = run.status is RunStatus.SUCCESS
    counts.story[:0] = [f"thread {thread}, graph {graph}, workers {[p.pid for p in workers]}"]
    counts.story.append(f"last error {run.error_type}: {run.error_message}")
    counts.story.append(f"payments {payments}, mails {dict(mails)}")
    counts.runs_unfinished += not finished
    counts.duplicates_at_key_honouring_receivers += max(0, payments - 1)
    counts.silent_duplicates += sum(max(0, c - 1) for c in mails.values())
    counts.actions_missing += finished and (payments == 0 or len(mails) < 2)
    return counts


# -- faults that leave the process alive -----------------------------------------------------


@dataclass(frozen=True)
class Route:
    """How the trial's first worker reaches the database, and the proxy's control port."""

    dsn: str
    control: str | None = None


def fault_struck(dsn: str, trial: Trial, pid: int) -> bool:
    """Did the worker reach its fault point? It notes each fault in `matrix_faults`."""
    if trial.fault == "crash":
        return False
    return bool(world(dsn, "SELECT 1 FROM matrix_faults WHERE pid = %s", pid))


@contextmanager
def route_for(dsn: str, trial: Trial, restarts: str | None) -> Iterator[Route]:
    if trial.fault == "restart":
        yield Route(dsn, restarts)
        return
    if trial.fault != "drop":
        yield Route(dsn)
        return
    params = psycopg.conninfo.conninfo_to_dict(dsn)
    with Proxy(str(params.get("host") or "127.0.0.1"), int(params.get("port") or 5432)) as proxy:
        via = psycopg.conninfo.make_conninfo(dsn, host="127.0.0.1", port=str(proxy.port))
        yield Route(via, proxy.control)


def sync_journal(saver: DurablePostgresSaver) -> EffectJournal:
    journal = journal_of(saver)
    assert isinstance(journal, EffectJournal)
    return journal


def run_trial(
    dsn: str, trial: Trial, saver: DurablePostgresSaver, restarts: str | None = None
) -> Counts:
    with route_for(dsn, trial, restarts) as route:
        if trial.workflow == "seven":
            return seven_trial(dsn, trial, route, sync_journal(saver))
        return refund_trial(dsn, trial, route, saver)


def prepare(dsn: str) -> None:
    """The savers' tables and both examples' receivers, once."""
    seven_step_workflow.setup(dsn)
    with psycopg.connect(dsn, autocommit=True) as conn, conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(hashtext('crash matrix'))")
        conn.execute(northwind_refund.SCHEMA)
        conn.execute(
            "CREATE TABLE IF NOT EXISTS matrix_faults (pid INT NOT NULL, point TEXT NOT NULL)"
        )


def run_trials(
    dsn: str, trials: list[Trial], *, parallel: int, progress: bool = False
) -> list[Counts]:
    """Run the trials, `parallel` at a time; the counts of each, in order. Trials that
    restart the server run one by one on a private embedded server (`Restarts`)."""
    results: dict[int, Counts] = {}
    shown = Progress(len(trials), progress)
    on_shared = [(n, t) for n, t in enumerate(trials) if t.fault != "restart"]
    on_private = [(n, t) for n, t in enumerate(trials) if t.fault == "restart"]
    run_group(dsn, on_shared, parallel, None, results, shown)
    if on_private:
        with Restarts() as private:
            run_group(private.dsn, on_private, 1, private.control, results, shown)
    return [results[n] for n in range(len(trials))]


@dataclass
class Progress:
    total: int
    show: bool
    done: int = 0
    started: float = field(default_factory=time.monotonic)

    def tell(self, trial: Trial, counts: Counts) -> None:
        self.done += 1
        if self.show:
            failed = ""
            if counts.failures:
                failed = f" FAILED {counts.failures}\n    " + "\n    ".join(counts.story)
            elapsed = time.monotonic() - self.started
            print(
                f"[{self.done}/{self.total} {elapsed:5.0f} s] {trial.cell} after={trial.after}"
                f"{failed}",
                flush=True,
            )


def run_group(
    dsn: str,
    trials: list[tuple[int, Trial]],
    parallel: int,
    restarts: str | None,
    results: dict[int, Counts],
    progress: Progress,
) -> None:
    if not trials:
        return
    prepare(dsn)
    with (
        DurablePostgresSaver.from_conn_string(dsn, max_connections=parallel + 2) as saver,
        ThreadPoolExecutor(parallel) as pool,
    ):
        futures = [(n, t, pool.submit(run_trial, dsn, t, saver, restarts)) for n, t in trials]
        for n, trial, future in futures:
            results[n] = future.result()
            progress.tell(trial, results[n])


# -- the report ------------------------------------------------------------------------------

COLUMNS = {
    "trials": "trials",
    "faults_struck": "struck",
    "duplicates_at_key_honouring_receivers": "dup. at key-honouring receivers",
    "silent_duplicates": "silent dup.",
    "actions_missing": "actions missing",
    "runs_unfinished": "unfinished",
    "approvals_lost": "approvals lost",
    "model_calls_billed_again": "model re-asked",
    "operator_resolutions": "operator resolutions",
    "unnamed_errors_seen": "unnamed errors",
    "example_errors_seen": "the example's own raw errors",
}


def table(rows: dict[str, Counts], first: str) -> list[str]:
    lines = [
        f"| {first} | " + " | ".join(COLUMNS.values()) + " |",
        "|---|" + "---:|" * len(COLUMNS),
    ]
    for name, counts in rows.items():
        values = " | ".join(f"{getattr(counts, key):,}" for key in COLUMNS)
        lines.append(f"| {name} | {values} |")
    return lines


def report(trials: list[Trial], per_trial: list[Counts], seed: int, seconds: float) -> str:
    """The figures as Markdown: totals, then by fault and point, then by mode and saver."""
    groups: dict[str, dict[str, Counts]] = {"point": {}, "mode": {}}
    total = Counts()
    for trial, counts in zip(trials, per_trial, strict=True):
        total.add(counts)
        by_point = f"{trial.workflow}: {trial.fault} at `{trial.point}`"
        by_mode = f"{trial.workflow}: durability={trial.mode}, {trial.saver} saver"
        for group, key in (("point", by_point), ("mode", by_mode)):
            groups[group].setdefault(key, Counts()).add(counts)
    revision = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()
    lines = [
        f"{total.trials} trials, seed {seed}, {seconds / 60:.1f} min on "
        f"{os.cpu_count()} cores, revision {revision or '?'}, "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; reproduce with "
        f"`python tests/crash/matrix.py --trials {total.trials} --seed {seed}`.",
        "",
        *table({"all trials": total}, ""),
        "",
        "By fault and point (every mode and saver):",
        "",
        *table(dict(sorted(groups["point"].items())), "workflow: fault at point"),
        "",
        "By durability mode and saver class:",
        "",
        *table(dict(sorted(groups["mode"].items())), "workflow: mode, saver"),
    ]
    failed = [(t, c) for t, c in zip(trials, per_trial, strict=True) if c.failures]
    if failed:
        lines += ["", "Trials that failed, with what the matrix saw:", ""]
        for trial, counts in failed:
            lines.append(f"- {trial.cell} (after {trial.after}): {counts.failures}")
            lines += [f"  - {line}" for line in counts.story]
    return "\n".join(lines) + "\n"


def write_between_marks(path: Path, text: str) -> None:
    page = path.read_text()
    start, end = (page.index(mark) for mark in MARKS)
    path.write_text(page[: start + len(MARKS[0])] + "\n" + text + page[end:])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dsn", default=os.environ.get("LANGGRAPH_DURABLE_TEST_DSN"))
    parser.add_argument("--trials", type=int, default=300)
    parser.add_argument("--parallel", type=int, default=3)
    parser.add_argument("--seed", type=int, default=int(time.time()))
    parser.add_argument("--write", type=Path, help="a Markdown file with the two marks")
    args = parser.parse_args()
    if not args.dsn:
        parser.error("pass --dsn or set LANGGRAPH_DURABLE_TEST_DSN (a database it may fill)")
    trials = plan(args.trials, args.seed)
    started = time.monotonic()
    per_trial = run_trials(args.dsn, trials, parallel=args.parallel, progress=True)
    text = report(trials, per_trial, args.seed, time.monotonic() - started)
    print(text)
    if args.write:
        write_between_marks(args.write, text)
        print(f"wrote {args.write}")
    total = Counts()
    for counts in per_trial:
        total.add(counts)
    return 1 if total.failures else 0


if __name__ == "__main__":
    sys.exit(main())
