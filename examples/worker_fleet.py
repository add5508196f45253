"""A fleet of three workers, one SIGKILLed mid-run: the other two finish every run, once.

    python examples/worker_fleet.py                        # embedded Postgres, nothing to set up
    LANGGRAPH_DURABLE_DSN=postgresql://... python examples/worker_fleet.py --runs 20

Twelve refunds are queued as runs in Postgres (`RunRegistry.create`). Each run is a graph of
four steps: look up the order, refund it at the payment service, mail the customer, close
the ticket. The refund and the mail are `@effect`s; the payment service and the mailer are
tables that record every call they get, and neither deduplicates: only the effect journal
(and a `reconcile=` hook that asks the service by key) keeps each to one call.

Three worker processes run `Worker(saver, [refunds]).run_forever()`. Worker 2 is the one
this script kills. So that the kill lands at the worst moment every time, worker 2 pauses
inside its first refund call, right after the payment service recorded the refund (as if the
response were slow to come back): the money has moved and the journal does not know yet.
The script waits for that state in the database (worker 2 owns a running run, the run's
first step is committed, the payment service has its refund), then SIGKILLs worker 2.

Workers 1 and 3 go on with the queue. Worker 2's run is still `running` under its lease;
once the lease has run out (3 s here, 30 s by default) one of them takes the run over at a
new fencing token, resumes it from its last checkpoint, and the journal's reconcile hook
finds the refund at the payment service instead of refunding again. At the end the script
stops the two workers with SIGTERM (a worker stopped mid-run hands its run back to the
queue) and prints a report. Exit code 0 means every claim of the report held.

The DSN reaches the worker processes through the environment (`LANGGRAPH_DURABLE_DSN`),
never their command lines, where any user of the machine could read a password.
Subcommands: `story` (the default) and `worker`, which the story starts.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from datetime import datetime
from typing import Any

import psycopg
from langgraph.graph import END, START, StateGraph
from psycopg.rows import dict_row
from typing_extensions import TypedDict

from langgraph_durable import (
    DurablePostgresSaver,
    GraphVersion,
    Reconciled,
    Run,
    RunRegistry,
    RunStatus,
    Worker,
    effect,
)
from langgraph_durable.embedded import DSN_ENV_VAR, demo_database, demo_note

WORKERS = ["worker-1", "worker-2", "worker-3"]
VICTIM = "worker-2"
LEASE_S = 3.0
IDLE_WAIT_S = 1.0
SERVICE_LATENCY_S = 0.05  # each call to the payment service or the mailer takes this long
HOLD_LIMIT_S = 120.0  # a held worker whose parent never kills it gives up after this
HANG_GUARD_S = 180.0  # a correct story never gets near this
EXIT_NOT_KILLED = 5
NODES = ["look_up", "refund", "notify", "close"]

SCHEMA = """
CREATE TABLE IF NOT EXISTS wf_steps (
    id SERIAL PRIMARY KEY, batch TEXT NOT NULL, order_no INT NOT NULL, node TEXT NOT NULL,
    worker TEXT NOT NULL, at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp());
CREATE TABLE IF NOT EXISTS wf_refunds (
    id SERIAL PRIMARY KEY, batch TEXT NOT NULL, order_no INT NOT NULL, amount INT NOT NULL,
    key TEXT NOT NULL, worker TEXT NOT NULL,
    at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp());
CREATE TABLE IF NOT EXISTS wf_mails (
    id SERIAL PRIMARY KEY, batch TEXT NOT NULL, order_no INT NOT NULL, key TEXT NOT NULL,
    worker TEXT NOT NULL, at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp());
"""


class Refund(TypedDict, total=False):
    order_no: int
    amount: int
    refund_id: int
    mail_id: int
    closed_by: str


def db(dsn: str) -> psycopg.Connection[Any]:
    return psycopg.connect(dsn, autocommit=True)


def setup(dsn: str) -> None:
    with DurablePostgresSaver.from_conn_string(dsn) as saver:
        saver.setup()
    with db(dsn) as conn, conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(hashtext('worker_fleet'))")
        conn.execute(SCHEMA)


def graph_name(batch: str) -> str:
    """Each story's runs get a graph name of their own, so that two stories sharing one
    database never take each other's runs."""
    return f"refunds-{batch}"


# -- the graph, as every worker process builds it ----------------------------------------------


def build(
    saver: DurablePostgresSaver, dsn: str, batch: str, worker: str, hold: bool
) -> GraphVersion:
    """The refund graph of one story, run by `worker`; `hold`: pause in the first refund."""
    held = threading.Event()

    def find(table: str) -> Any:
        def look(idempotency_key: str, *args: Any, **kwargs: Any) -> Reconciled:
            with db(dsn) as conn:
                row = conn.execute(
                    f"SELECT id FROM {table} WHERE key = %s", (idempotency_key,)
                ).fetchone()
            return Reconciled.completed(row[0]) if row else Reconciled.absent()

        return look

    @effect(name="payments.refund", reconcile=find("wf_refunds"))
    def refund_at_payments(order_no: int, amount: int, idempotency_key: str = "") -> int:
        """The payment service refunds on every call; it keeps the key, but does not dedupe."""
        time.sleep(SERVICE_LATENCY_S)  # the service's latency, not a synchronisation
        with db(dsn) as conn:
            row = conn.execute(
                "INSERT INTO wf_refunds (batch, order_no, amount, key, worker) "
                "VALUES (%s, %s, %s, %s, %s) RETURNING id",
                (batch, order_no, amount, idempotency_key, worker),
            ).fetchone()
        assert row is not None
        if hold and not held.is_set():
            held.set()  # the refund is recorded; this worker waits here to be SIGKILLed
            threading.Event().wait(HOLD_LIMIT_S)
            os._exit(EXIT_NOT_KILLED)
        return int(row[0])

    @effect(name="mailer.send", reconcile=find("wf_mails"))
    def mail_customer(order_no: int, idempotency_key: str = "") -> int:
        """The mailer sends on every call, like the payment service."""
        time.sleep(SERVICE_LATENCY_S)
        with db(dsn) as conn:
            row = conn.execute(
                "INSERT INTO wf_mails (batch, order_no, key, worker) VALUES (%s, %s, %s, %s) "
                "RETURNING id",
                (batch, order_no, idempotency_key, worker),
            ).fetchone()
        assert row is not None
        return int(row[0])

    def step(state: Refund, node: str) -> None:
        with db(dsn) as conn:
            conn.execute(
                "INSERT INTO wf_steps (batch, order_no, node, worker) VALUES (%s, %s, %s, %s)",
                (batch, state["order_no"], node, worker),
            )

    def look_up(state: Refund) -> Refund:
        step(state, "look_up")
        return {"amount": 40 + 5 * state["order_no"]}

    def refund(state: Refund) -> Refund:
        step(state, "refund")
        return {"refund_id": refund_at_payments(state["order_no"], state["amount"])}

    def notify(state: Refund) -> Refund:
        step(state, "notify")
        return {"mail_id": mail_customer(state["order_no"])}

    def close(state: Refund) -> Refund:
        step(state, "close")
        return {"closed_by": worker}

    builder = StateGraph(Refund)
    previous = START
    for name, node in zip(NODES, [look_up, refund, notify, close], strict=True):
        builder.add_node(name, node)
        builder.add_edge(previous, name)
        previous = name
    builder.add_edge(previous, END)
    return GraphVersion(graph_name(batch), "1", builder.compile(checkpointer=saver))


# -- a worker process ---------------------------------------------------------------------------


class FleetWorker(Worker):
    """A `Worker` that knows whether it is in the middle of a run (for its SIGTERM handler)."""

    busy = False

    def execute(self, run: Run) -> Run:
        self.busy = True
        try:
            return super().execute(run)
        finally:
            self.busy = False


def worker(batch: str, name: str, hold: bool) -> int:
    """Run the story's runs until SIGTERM; the DSN comes from the environment."""
    dsn = os.environ.get(DSN_ENV_VAR)
    if not dsn:
        raise SystemExit(f"worker: set {DSN_ENV_VAR} (the story does)")
    with DurablePostgresSaver.from_conn_string(dsn) as saver:
        refunds = build(saver, dsn, batch, name, hold)
        fleet_worker = FleetWorker(
            saver, [refunds], lease_seconds=LEASE_S, idle_wait=IDLE_WAIT_S, name=f"{name}@{batch}"
        )

        def on_sigterm(signum: int, frame: Any) -> None:
            fleet_worker.stop()  # take no new run
            if fleet_worker.busy:
                raise KeyboardInterrupt  # leave the current run: it is handed back at once

        signal.signal(signal.SIGTERM, on_sigterm)
        try:
            fleet_worker.run_forever()
        except KeyboardInterrupt:
            print(f"{name}: stopped mid-run, the run went back to the queue", file=sys.stderr)
    return 0


# -- the story ----------------------------------------------------------------------------------


def start_worker(dsn: str, batch: str, name: str) -> subprocess.Popen[str]:
    """A worker process; the DSN goes through its environment, not its command line."""
    cmd = [sys.executable, __file__, "worker", "--batch", batch, "--name", name]
    if name == VICTIM:
        cmd.append("--hold")
    return subprocess.Popen(
        cmd,
        env={**os.environ, DSN_ENV_VAR: dsn},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_until(
    dsn: str,
    sql: str,
    params: dict[str, Any],
    procs: dict[str, subprocess.Popen[str]],
    what: str,
) -> list[tuple[Any, ...]]:
    """Poll the database until `sql` returns rows; raise when a worker dies first."""
    deadline = time.monotonic() + HANG_GUARD_S
    with db(dsn) as conn:
        while time.monotonic() < deadline:
            rows = conn.execute(sql, params).fetchall()
            if rows:
                return rows
            for name, proc in procs.items():
                if proc.poll() is not None:
                    err = proc.stderr.read() if proc.stderr else ""
                    raise RuntimeError(f"{name} exited ({proc.returncode}) before {what}:\n{err}")
            time.sleep(0.05)  # a poll interval, not a synchronisation
    raise TimeoutError(f"gave up waiting for {what}")


def start_fleet(dsn: str, batch: str) -> dict[str, subprocess.Popen[str]]:
    """Start the workers and wait until each has announced itself in the database."""
    procs = {name: start_worker(dsn, batch, name) for name in WORKERS}
    wait_until(
        dsn,
        "SELECT 1 FROM langgraph_durable_workers WHERE worker_id = ANY(%(ids)s) "
        "HAVING count(*) = %(n)s",
        {"ids": [f"{n}@{batch}" for n in WORKERS], "n": len(WORKERS)},
        procs,
        "every worker announced itself",
    )
    return procs


def create_runs(dsn: str, batch: str, count: int) -> list[Run]:
    """Queue one run per order, each on a thread of its own."""
    with DurablePostgresSaver.from_conn_string(dsn) as saver:
        refunds = build(saver, dsn, batch, "creator", hold=False)
        runs = RunRegistry(saver)
        return [
            runs.create(
                refunds, {"order_no": n}, thread_id=f"{batch}-order-{n}", metadata={"order_no": n}
            )
            for n in range(1, count + 1)
        ]


def wait_for_victim(dsn: str, batch: str, procs: dict[str, subprocess.Popen[str]]) -> int:
    """Wait until the victim owns a run that made progress and refunded; its order number."""
    rows = wait_until(
        dsn,
        "SELECT (r.metadata ->> 'order_no')::int FROM langgraph_durable_runs r "
        "JOIN wf_refunds f ON f.batch = %(batch)s AND f.worker = %(victim)s "
        "    AND f.order_no = (r.metadata ->> 'order_no')::int "
        "WHERE r.graph_name = %(graph)s AND r.owner = %(owner)s AND r.status = 'running' "
        "    AND r.step >= 1",
        {
            "batch": batch,
            "victim": VICTIM,
            "graph": graph_name(batch),
            "owner": f"{VICTIM}@{batch}",
        },
        procs,
        f"{VICTIM} refunded an order in a run that made progress",
    )
    return int(rows[0][0])


def kill(dsn: str, proc: subprocess.Popen[str]) -> tuple[int, datetime]:
    """SIGKILL a worker (no cleanup, like an OOM kill); its exit code and the database time."""
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    with db(dsn) as conn:
        row = conn.execute("SELECT clock_timestamp()").fetchone()
    assert row is not None
    return proc.returncode, row[0]


def wait_all(
    dsn: str,
    batch: str,
    run_ids: list[str],
    procs: dict[str, subprocess.Popen[str]],
    victim_order: int,
    *,
    progress: bool = True,
) -> None:
    """Wait until every run has finished (`RunRegistry.wait_for`); with `progress`, say
    what is left whenever the statuses of the story's runs change kind."""
    deadline = time.monotonic() + HANG_GUARD_S
    shown: tuple[str, ...] = ()
    with DurablePostgresSaver.from_conn_string(dsn) as saver:
        runs = RunRegistry(saver)
        while True:
            found = runs.list(graph_name=graph_name(batch), limit=len(run_ids))
            counts = Counter(run.status.value for run in found)
            waiting = [run for run in found if not run.finished]
            left = [run.metadata.get("order_no") for run in waiting]
            only_victim = left == [victim_order] and waiting[0].owner == f"{VICTIM}@{batch}"
            kinds = (*sorted(counts), str(only_victim))
            if progress and kinds != shown:
                now = ", ".join(f"{status} {n}" for status, n in sorted(counts.items()))
                print(f"  runs: {now}", flush=True)
                shown = kinds
                if only_victim:
                    print(
                        f"  only order {victim_order} is left: 'running' under dead {VICTIM}'s "
                        "lease until it runs out",
                        flush=True,
                    )
            if not waiting:
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"runs not finished: {[run.run_id for run in waiting]}")
            for name, proc in procs.items():
                if proc.poll() is not None:
                    raise RuntimeError(f"{name} exited ({proc.returncode})")
            # Wakes when any run changes (LISTEN/NOTIFY), or after a second.
            runs.wait_for(waiting[0].run_id, timeout=1)


def stop_fleet(procs: dict[str, subprocess.Popen[str]]) -> dict[str, int]:
    """SIGTERM every worker: each takes no new run and hands back the one it runs, if any."""
    for proc in procs.values():
        proc.send_signal(signal.SIGTERM)
    codes = {}
    for name, proc in procs.items():
        _, err = proc.communicate(timeout=HANG_GUARD_S)
        if proc.returncode != 0:
            print(f"{name} exited with {proc.returncode}:\n{err}", file=sys.stderr)
        codes[name] = proc.returncode
    return codes


# -- what happened ------------------------------------------------------------------------------


def collect(dsn: str, batch: str) -> dict[str, Any]:
    """The runs, every step each worker started, and what the receivers recorded."""
    found: dict[str, Any] = {"batch": batch}
    with psycopg.connect(dsn, autocommit=True, row_factory=dict_row) as conn:
        found["runs"] = conn.execute(
            "SELECT (metadata ->> 'order_no')::int AS order_no, status, attempt, created_at, "
            "finished_at FROM langgraph_durable_runs WHERE graph_name = %s ORDER BY 1",
            (graph_name(batch),),
        ).fetchall()
        found["journal"] = conn.execute(
            "SELECT split_part(thread_id, '-order-', 2)::int AS order_no, node, status, "
            "attempt, resolved_by FROM langgraph_durable_effects "
            "WHERE thread_id LIKE %s ORDER BY 1, step",
            (f"{batch}-order-%",),
        ).fetchall()
        for table in ("wf_steps", "wf_refunds", "wf_mails"):
            found[table] = conn.execute(
                f"SELECT * FROM {table} WHERE batch = %s ORDER BY id", (batch,)
            ).fetchall()
    return found


def finished_by(found: dict[str, Any]) -> dict[int, str]:
    """Which worker ran each order's last step."""
    return {s["order_no"]: s["worker"] for s in found["wf_steps"] if s["node"] == "close"}


def recovery(found: dict[str, Any], order: int, killed_at: datetime) -> tuple[str, float]:
    """Who went on with the killed run, and seconds from the kill to its first step there."""
    after = [s for s in found["wf_steps"] if s["order_no"] == order and s["at"] > killed_at]
    first = min(after, key=lambda s: s["at"])
    return first["worker"], (first["at"] - killed_at).total_seconds()


def deliveries(found: dict[str, Any], table: str) -> Counter[str]:
    """Calls that reached a receiver, per idempotency key."""
    return Counter(row["key"] for row in found[table])


def check(found: dict[str, Any], count: int, victim_order: int) -> dict[str, bool]:
    """The claims of the story, each true or false."""
    orders = set(range(1, count + 1))
    by = finished_by(found)
    victim_run = next(r for r in found["runs"] if r["order_no"] == victim_order)
    return {
        f"all {count} runs succeeded": [r["status"] for r in found["runs"]]
        == [RunStatus.SUCCESS.value] * count,
        f"{VICTIM} finished none": VICTIM not in by.values() and set(by) == orders,
        f"the killed run was taken over and ran again (attempt {victim_run['attempt']})": (
            victim_run["attempt"] == 2 and by.get(victim_order, VICTIM) != VICTIM
        ),
        "one refund per order, each key delivered once": (
            set(deliveries(found, "wf_refunds").values()) == {1}
            and sorted(r["order_no"] for r in found["wf_refunds"]) == sorted(orders)
        ),
        "one mail per order, each key delivered once": (
            set(deliveries(found, "wf_mails").values()) == {1}
            and sorted(r["order_no"] for r in found["wf_mails"]) == sorted(orders)
        ),
    }


def print_report(found: dict[str, Any], count: int, victim_order: int, killed_at: datetime) -> bool:
    statuses = Counter(r["status"] for r in found["runs"])
    print("\nruns by status: " + ", ".join(f"{s} {n}" for s, n in sorted(statuses.items())))
    by = finished_by(found)
    print("which worker finished which:")
    for name in WORKERS:
        orders = sorted(o for o, w in by.items() if w == name)
        marked = [f"{o}*" if o == victim_order else str(o) for o in orders]
        print(f"  {name}: {len(orders):>2} runs  (orders {', '.join(marked) or '-'})")
    taker, seconds = recovery(found, victim_order, killed_at)
    attempts = next(r["attempt"] for r in found["runs"] if r["order_no"] == victim_order)
    print(
        f"recovery: order {victim_order}* ({VICTIM}'s run) resumed by {taker} {seconds:.1f} s "
        f"after the kill (lease {LEASE_S:g} s); {attempts} executions"
    )
    journal = [j for j in found["journal"] if j["order_no"] == victim_order]
    print(
        "the killed run's effects in the journal: "
        + ", ".join(f"{j['node']} {j['status']} ({j['resolved_by'] or 'sent'})" for j in journal)
    )
    for label, table in (("refunds", "wf_refunds"), ("mails", "wf_mails")):
        per_key = deliveries(found, table)
        spread = ", ".join(f"{n}x: {k} keys" for n, k in sorted(Counter(per_key.values()).items()))
        print(f"{label} delivered per key: {spread}")
    claims = check(found, count, victim_order)
    for claim, held in claims.items():
        print(f"  [{'ok' if held else 'FAILED'}] {claim}")
    ok = all(claims.values())
    print(f"all claims hold: {'yes' if ok else 'NO'}")
    return ok


def story(dsn: str, count: int) -> int:
    setup(dsn)
    batch = uuid.uuid4().hex[:8]
    print(f"batch {batch}: {count} refund runs, {len(WORKERS)} workers, lease {LEASE_S:g} s")
    procs = start_fleet(dsn, batch)
    try:
        print(f"{', '.join(WORKERS)} started and announced themselves")
        run_ids = [run.run_id for run in create_runs(dsn, batch, count)]
        print(f"{count} runs created (pending); the workers take them")
        victim_order = wait_for_victim(dsn, batch, procs)
        print(
            f"{VICTIM} owns the run of order {victim_order}: step 1 committed, the refund\n"
            "  recorded at the payment service, its result not yet journaled"
        )
        code, killed_at = kill(dsn, procs.pop(VICTIM))
        print(f"{VICTIM} SIGKILLed (exit {code}); its run stays 'running' until its lease runs out")
        print(f"waiting for {' and '.join(procs)} to finish every run ...", flush=True)
        wait_all(dsn, batch, run_ids, procs, victim_order)
    except BaseException:
        for proc in procs.values():
            proc.kill()
        raise
    codes = stop_fleet(procs)
    print(
        "stopped with SIGTERM: "
        + ", ".join(f"{name} exit {rc}" for name, rc in codes.items())
        + " (idle: nothing to hand back)"
    )
    ok = print_report(collect(dsn, batch), count, victim_order, killed_at)
    ok = ok and code == -signal.SIGKILL and set(codes.values()) == {0}
    return 0 if ok else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", nargs="?", default="story", choices=["story", "worker"])
    parser.add_argument("--runs", type=int, default=12, help="runs to create (story)")
    parser.add_argument("--batch", help="the story's batch (worker)")
    parser.add_argument("--name", help="this worker's name (worker)")
    parser.add_argument("--hold", action="store_true", help="pause in the first refund (worker)")
    args = parser.parse_args()
    if args.command == "worker":
        return worker(args.batch, args.name, args.hold)
    dsn, embedded = demo_database()
    try:
        print(demo_note(embedded))
        return story(dsn, args.runs)
    finally:
        if embedded is not None:
            embedded.stop()


if __name__ == "__main__":
    sys.exit(main())
