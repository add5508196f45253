"""A worker dies in the middle of a payment call: did the card get charged? Ask, then resume.

    python examples/payment_crash.py                   # embedded Postgres, nothing to set up
    LANGGRAPH_DURABLE_DSN=postgresql://... python examples/payment_crash.py

A checkout (check the cart -> charge the card -> ship -> receipt) runs in a worker process.
The payment service is a table: it commits the charge, then the worker is SIGKILLed before
the call returns. The journal holds an attempt with no outcome. Three endings:

- no hook: the resumed run stops with `EffectOutcomeUnknown` (a retry could charge twice);
  the operator lists open effects (`langgraph-durable effects`), finds the charge by its
  key at the payment service, records it (`langgraph-durable resolve KEY --completed`), and
  the next resume finishes: one charge;
- a `reconcile=` hook looks the charge up by key on resume and stores what it found;
- with the hook, when the worker died before the charge reached the service, the hook
  finds nothing and a second attempt charges once.

Each crash waits on a real signal: the charge row at the payment service, or the journal's
running row. Subcommands (`story`, `setup`, `worker`, `report`) are separate processes, as in
production. Exit code 0 means one charge per checkout in every ending.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from typing import Any

import psycopg
from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict

from langgraph_durable import DurablePostgresSaver, EffectOutcomeUnknown, Reconciled, effect
from langgraph_durable.embedded import demo_database, demo_note

SCHEMA = """
CREATE TABLE IF NOT EXISTS pay_charges (
    id SERIAL PRIMARY KEY, thread_id TEXT NOT NULL, order_id TEXT NOT NULL,
    amount_cents INT NOT NULL, metadata_key TEXT, pid INT NOT NULL,
    at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp());
CREATE TABLE IF NOT EXISTS pay_shipments (
    id SERIAL PRIMARY KEY, thread_id TEXT NOT NULL, order_id TEXT NOT NULL, pid INT NOT NULL);
"""
CHARGE = "payments.charge"
HOLD_LIMIT_S = 120.0
EXIT_OUTCOME_UNKNOWN = 4
EXIT_NOT_KILLED = 5
HOLDS = ["before-call", "in-call"]


class Checkout(TypedDict, total=False):
    order_id: str
    amount_cents: int
    charge: dict[str, Any]
    shipment_id: int
    receipt: str


def db(dsn: str) -> psycopg.Connection[Any]:
    return psycopg.connect(dsn, autocommit=True)


def setup(dsn: str) -> None:
    with DurablePostgresSaver.from_conn_string(dsn) as saver:
        saver.setup()
    with db(dsn) as conn, conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(hashtext('payment_crash'))")
        conn.execute(SCHEMA)


def hold() -> None:
    """Wait to be SIGKILLed by the parent, which watches for this worker's signal."""
    threading.Event().wait(HOLD_LIMIT_S)
    os._exit(EXIT_NOT_KILLED)


def find_charge(dsn: str, key: str) -> int | None:
    """The payment service's search: charges carry the key in their metadata."""
    with db(dsn) as conn:
        row = conn.execute("SELECT id FROM pay_charges WHERE metadata_key = %s", (key,)).fetchone()
    return int(row[0]) if row else None


def build(
    dsn: str, thread: str, *, reconcile: bool, hold_at: str | None
) -> StateGraph[Any, Any, Any, Any]:
    def charge_reconciled(idempotency_key: str, order_id: str, amount_cents: int) -> Reconciled:
        found = find_charge(dsn, idempotency_key)
        return Reconciled.completed({"charge_id": found}) if found else Reconciled.absent()

    @effect(name=CHARGE, reconcile=charge_reconciled if reconcile else None)
    def charge_card(order_id: str, amount_cents: int, idempotency_key: str = "") -> Any:
        """The payment service does not deduplicate; it only stores the key as metadata."""
        if hold_at == "before-call":
            hold()  # the journal row is committed: the attempt started, the call did not
        with db(dsn) as conn:
            row = conn.execute(
                "INSERT INTO pay_charges (thread_id, order_id, amount_cents, metadata_key, pid) "
                "VALUES (%s, %s, %s, %s, %s) RETURNING id",
                (thread, order_id, amount_cents, idempotency_key, os.getpid()),
            ).fetchone()
        assert row is not None
        if hold_at == "in-call":
            hold()  # the card is charged; the response never reaches the worker
        return {"charge_id": row[0]}

    def check_cart(state: Checkout) -> Checkout:
        if state["amount_cents"] <= 0:
            raise ValueError("empty cart")
        return {}

    def charge(state: Checkout) -> Checkout:
        return {"charge": charge_card(state["order_id"], state["amount_cents"])}

    def ship(state: Checkout) -> Checkout:
        with db(dsn) as conn:
            row = conn.execute(
                "INSERT INTO pay_shipments (thread_id, order_id, pid) VALUES (%s, %s, %s) "
                "RETURNING id",
                (thread, state["order_id"], os.getpid()),
            ).fetchone()
        assert row is not None
        return {"shipment_id": row[0]}

    def receipt(state: Checkout) -> Checkout:
        return {"receipt": f"order {state['order_id']}: charge {state['charge']['charge_id']}"}

    builder = StateGraph(Checkout)
    previous = START
    for name, node in [("check_cart", check_cart), ("charge", charge), ("ship", ship)]:
        builder.add_node(name, node)
        builder.add_edge(previous, name)
        previous = name
    builder.add_node("receipt", receipt)
    builder.add_edge(previous, "receipt")
    builder.add_edge("receipt", END)
    return builder


def worker(dsn: str, thread: str, *, reconcile: bool, hold_at: str | None) -> int:
    """Run or resume the checkout; exit 4 when the charge's outcome is unknown."""
    config: Any = {"configurable": {"thread_id": thread}}
    with DurablePostgresSaver.from_conn_string(dsn) as saver:
        graph = build(dsn, thread, reconcile=reconcile, hold_at=hold_at).compile(checkpointer=saver)
        state = graph.get_state(config)
        resume = bool(state.tasks)  # stopped mid-run: go on from there
        payload = None if resume else {"order_id": f"A-{thread[-6:]}", "amount_cents": 4200}
        try:
            if state.created_at is not None and not resume:  # it finished: do not run again
                final = state.values
            else:
                final = graph.invoke(payload, config, durability="sync")
        except EffectOutcomeUnknown as exc:
            print(json.dumps({"unknown_key": exc.key}), flush=True)
            return EXIT_OUTCOME_UNKNOWN
    print(json.dumps({"pid": os.getpid(), **final}), flush=True)
    return 0


def journal_row(dsn: str, thread: str) -> dict[str, Any] | None:
    """The charge's row in the effect journal, as an operator would read it."""
    with db(dsn) as conn:
        cur = conn.execute(
            "SELECT key, status, attempt, resolved_by, replays FROM langgraph_durable_effects "
            "WHERE thread_id = %s AND effect_name = %s",
            (thread, CHARGE),
        )
        names = [c.name for c in cur.description or []]
        row = cur.fetchone()
    return dict(zip(names, row, strict=True)) if row else None


def report(dsn: str, thread: str) -> dict[str, Any]:
    with db(dsn) as conn:
        charges = conn.execute(
            "SELECT id, amount_cents, metadata_key, pid FROM pay_charges WHERE thread_id = %s "
            "ORDER BY id",
            (thread,),
        ).fetchall()
        shipments = conn.execute(
            "SELECT id, pid FROM pay_shipments WHERE thread_id = %s ORDER BY id", (thread,)
        ).fetchall()
    return {
        "charges": [list(c) for c in charges],
        "shipments": [list(s) for s in shipments],
        "journal": journal_row(dsn, thread),
    }


def wait_until(dsn: str, query: str, thread: str, proc: subprocess.Popen[Any]) -> None:
    """Poll for the worker's signal (a row it committed); raise if it exits first."""
    deadline = time.monotonic() + 60
    with db(dsn) as conn:
        while time.monotonic() < deadline:
            if conn.execute(query, {"thread": thread, "effect": CHARGE}).fetchone():
                return
            if proc.poll() is not None:
                raise RuntimeError(f"the worker exited ({proc.returncode}) before its signal")
            time.sleep(0.02)
    proc.kill()
    raise TimeoutError("the worker never sent its signal")


SIGNALS = {
    "in-call": "SELECT 1 FROM pay_charges WHERE thread_id = %(thread)s",
    "before-call": "SELECT 1 FROM langgraph_durable_effects WHERE thread_id = %(thread)s "
    "AND effect_name = %(effect)s AND status = 'running'",
}


def crash(me: list[str], dsn: str, thread: str, hold_at: str) -> int:
    """Start a worker, SIGKILL it at `hold_at`; its pid."""
    proc = subprocess.Popen([*me, "worker", "--hold", hold_at])
    wait_until(dsn, SIGNALS[hold_at], thread, proc)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    return proc.pid


def run(cmd: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, check=False)


def cli(dsn: str, *args: str) -> subprocess.CompletedProcess[str]:
    """The operator's CLI, `langgraph-durable`, as its own process."""
    return run([sys.executable, "-m", "langgraph_durable.cli", *args])  # DSN: from the env


def ending(dsn: str, title: str, *, reconcile: bool, hold_at: str) -> bool:
    thread = f"checkout-{uuid.uuid4().hex[:8]}"
    me = [sys.executable, __file__, "--thread", thread]  # DSN: from the env
    if reconcile:
        me.append("--reconcile")
    print(f"\n== {title} ({thread})")
    pid = crash(me, dsn, thread, hold_at)
    seen = len(report(dsn, thread)["charges"])
    where = {"in-call": "inside the call", "before-call": "before the call"}[hold_at]
    print(f"worker {pid} SIGKILLed {where}; charges at the payment service: {seen}")
    resumed = run([*me, "worker"])
    if resumed.returncode == EXIT_OUTCOME_UNKNOWN:
        key = json.loads(resumed.stdout.strip().splitlines()[-1])["unknown_key"]
        print("resume stopped: EffectOutcomeUnknown (a blind retry could charge twice)")
        print("operator: langgraph-durable effects --thread", thread)
        print("  " + cli(dsn, "effects", "--thread", thread).stdout.strip())
        charge_id = find_charge(dsn, key)
        print(f"operator: the payment service has charge {charge_id} under that key")
        if charge_id is None:
            done = cli(dsn, "resolve", key, "--allow-retry")
        else:
            done = cli(dsn, "resolve", key, "--completed", json.dumps({"charge_id": charge_id}))
        print("operator: langgraph-durable resolve ... ->", done.stdout.strip() or done.stderr)
        resumed = run([*me, "worker"])
    if resumed.returncode != 0:
        print(resumed.stdout + resumed.stderr, file=sys.stderr)
        return False
    final = json.loads(resumed.stdout.strip().splitlines()[-1])
    found = report(dsn, thread)
    row = found["journal"] or {}
    print(f"resumed: {final['receipt']}")
    print(
        f"journal: status={row.get('status')} attempt={row.get('attempt')} "
        f"resolved_by={row.get('resolved_by')}"
    )
    ok = len(found["charges"]) == 1 and len(found["shipments"]) == 1
    ok = ok and row.get("status") == "completed"
    print(f"charged once and shipped once: {'yes' if ok else 'NO'}")
    return ok


def story(dsn: str) -> int:
    setup(dsn)
    results = [
        ending(dsn, "no hook: the operator resolves", reconcile=False, hold_at="in-call"),
        ending(dsn, "reconcile hook, card charged", reconcile=True, hold_at="in-call"),
        ending(dsn, "reconcile hook, never charged", reconcile=True, hold_at="before-call"),
    ]
    print(f"\none charge per checkout in every ending: {'yes' if all(results) else 'NO'}")
    return 0 if all(results) else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dsn")
    parser.add_argument("--thread")
    parser.add_argument("--reconcile", action="store_true", help="give the charge a hook")
    parser.add_argument("--hold", choices=HOLDS, help="wait to be killed at this point")
    commands = ["story", "setup", "worker", "report"]
    parser.add_argument("command", nargs="?", default="story", choices=commands)
    args = parser.parse_args()
    dsn, embedded = demo_database(args.dsn)
    try:
        if args.command == "story":
            print(demo_note(embedded))
            return story(dsn)
        if args.command == "setup":
            setup(dsn)
        elif args.command == "worker":
            return worker(dsn, args.thread, reconcile=args.reconcile, hold_at=args.hold)
        elif args.command == "report":
            print(json.dumps(report(dsn, args.thread), default=str))
        return 0
    finally:
        if embedded is not None:
            embedded.stop()


if __name__ == "__main__":
    sys.exit(main())
