"""Northwind: a $420 refund for order 8890 that needs a manager's approval.

    python examples/northwind_refund.py                    # the whole story, one command
    python examples/northwind_refund.py --mode exit --wrong-way

Six steps: find the order, check the refund rules, tell the customer the refund is under
review, wait for approval, refund, confirm. The story, on a clock you can move:

- 18:00  a worker starts the run; it emails the customer and stops at the approval.
- 02:00  the worker is SIGKILLed for a deploy (the run is only in Postgres now).
- 09:00  the manager approves from another process; the refund and the confirmation go out.

The payment service is fake but acts like a real one: it honours idempotency keys. The
mailer does not, so only the effect journal keeps the emails to one each. Each subcommand
(`start`, `approve`, `manual-refund`, `report`) is its own process, as in production.
`--wrong-way` puts the email and the approval in one node: the guard reports it and the
journal still sends one email. Exit code 0 means every count came out right.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
import uuid
import warnings
from datetime import datetime, timezone
from typing import Any

import psycopg
from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt
from typing_extensions import TypedDict

from langgraph_durable import DurablePostgresSaver, effect
from langgraph_durable.approvals import ApprovalDecision, add_approval_before, resume_approval
from langgraph_durable.embedded import demo_database, demo_note

SCHEMA = """
CREATE TABLE IF NOT EXISTS northwind_clock (id INT PRIMARY KEY, now TIMESTAMPTZ NOT NULL);
CREATE TABLE IF NOT EXISTS northwind_orders (
    order_id TEXT PRIMARY KEY, customer TEXT NOT NULL, total INT NOT NULL,
    refunded INT NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS northwind_payments (
    id SERIAL PRIMARY KEY, idempotency_key TEXT UNIQUE, order_id TEXT NOT NULL,
    amount INT NOT NULL, at TIMESTAMPTZ NOT NULL);
CREATE TABLE IF NOT EXISTS northwind_emails (
    id SERIAL PRIMARY KEY, thread_id TEXT NOT NULL, to_addr TEXT NOT NULL,
    subject TEXT NOT NULL, at TIMESTAMPTZ NOT NULL);
CREATE TABLE IF NOT EXISTS northwind_events (thread_id TEXT, event TEXT, pid INT);
"""
MANAGERS = {"manager-ana": 1000, "lead-bo": 200}


class Refund(TypedDict, total=False):
    thread: str
    order_id: str
    customer: str
    amount: int
    needs_approval: bool
    approval: dict[str, Any]
    approval_outcome: str
    payment_id: int
    log: list[str]


def db(dsn: str) -> psycopg.Connection[Any]:
    return psycopg.connect(dsn, autocommit=True)


# -- the outside world: a clock, orders, a payment service and a mailer --------------------


def clock_now(dsn: str) -> datetime:
    with db(dsn) as conn:
        row = conn.execute("SELECT now FROM northwind_clock WHERE id = 1").fetchone()
    return row[0] if row else datetime.now(timezone.utc)


def set_clock(dsn: str, hhmm: str, day: int = 1) -> None:
    at = datetime(2026, 12, day, int(hhmm[:2]), int(hhmm[3:]), tzinfo=timezone.utc)
    with db(dsn) as conn:
        conn.execute(
            "INSERT INTO northwind_clock VALUES (1, %s) ON CONFLICT (id) DO UPDATE SET now = %s",
            (at, at),
        )


def payment_refund(dsn: str, order_id: str, amount: int, idempotency_key: str | None) -> int:
    """The payment service: a second request with the same key returns the first refund."""
    with db(dsn) as conn, conn.transaction():
        if idempotency_key is not None:
            found = conn.execute(
                "SELECT id FROM northwind_payments WHERE idempotency_key = %s", (idempotency_key,)
            ).fetchone()
            if found:
                return int(found[0])
        row = conn.execute(
            "INSERT INTO northwind_payments (idempotency_key, order_id, amount, at) "
            "VALUES (%s, %s, %s, %s) RETURNING id",
            (idempotency_key, order_id, amount, clock_now(dsn)),
        ).fetchone()
        conn.execute(
            "UPDATE northwind_orders SET refunded = refunded + %s WHERE order_id = %s",
            (amount, order_id),
        )
    assert row is not None
    return int(row[0])


def send_mail(dsn: str, thread: str, to: str, subject: str) -> None:
    """The mailer: every call is a new email (it knows nothing of idempotency keys)."""
    with db(dsn) as conn:
        conn.execute(
            "INSERT INTO northwind_emails (thread_id, to_addr, subject, at) "
            "VALUES (%s, %s, %s, %s)",
            (thread, to, subject, clock_now(dsn)),
        )


# -- the workflow ----------------------------------------------------------------------------


def build(dsn: str, *, wrong_way: bool = False) -> StateGraph[Any, Any, Any, Any]:
    @effect(name="email")
    def email(thread: str, to: str, subject: str) -> str:
        send_mail(dsn, thread, to, subject)
        return subject

    @effect(name="refund", key=lambda order_id, amount: f"refund:{order_id}", retry="idempotent")
    def refund(order_id: str, amount: int, idempotency_key: str) -> int:
        return payment_refund(dsn, order_id, amount, idempotency_key)

    def find_order(state: Refund) -> Refund:
        with db(dsn) as conn:
            row = conn.execute(
                "SELECT customer FROM northwind_orders WHERE order_id = %s", (state["order_id"],)
            ).fetchone()
        if row is None:
            raise ValueError(f"no order {state['order_id']}")
        return {"customer": row[0], "log": ["find_order"]}

    def check_rules(state: Refund) -> Refund:
        return {"needs_approval": state["amount"] > 100, "log": [*state["log"], "check_rules"]}

    def tell_customer(state: Refund) -> Refund:
        email(state["thread"], state["customer"], f"Refund of ${state['amount']} under review")
        return {"log": [*state["log"], "tell_customer"]}

    def tell_and_wait_wrong_way(state: Refund) -> Refund:
        email(state["thread"], state["customer"], f"Refund of ${state['amount']} under review")
        answer = ApprovalDecision.model_validate(interrupt({"request": "approve?"}))
        return {"approval": answer.model_dump(), "log": [*state["log"], "tell_and_wait"]}

    def do_refund(state: Refund) -> Refund:
        payment = refund(state["order_id"], state["amount"])
        return {"payment_id": payment, "log": [*state["log"], "refund"]}

    def confirm(state: Refund) -> Refund:
        email(state["thread"], state["customer"], f"Your ${state['amount']} refund is done")
        return {"log": [*state["log"], "confirm"]}

    def authorize(state: Refund, decision: ApprovalDecision) -> bool | str:
        limit = MANAGERS.get(decision.approver, 0)
        return state["amount"] <= limit or f"may approve up to ${limit}"

    def revalidate(state: Refund, decision: ApprovalDecision) -> Any:
        with db(dsn) as conn:
            row = conn.execute(
                "SELECT total - refunded FROM northwind_orders WHERE order_id = %s",
                (state["order_id"],),
            ).fetchone()
        refundable = row[0] if row else 0
        return "proceed" if refundable >= state["amount"] else "no_longer_needed"

    builder = StateGraph(Refund)
    builder.add_node("find_order", find_order)
    builder.add_node("check_rules", check_rules)
    builder.add_node("refund", do_refund)
    builder.add_node("confirm", confirm)
    builder.add_edge(START, "find_order")
    builder.add_edge("find_order", "check_rules")
    builder.add_edge("refund", "confirm")
    builder.add_edge("confirm", END)
    if wrong_way:
        builder.add_node("tell_and_wait", tell_and_wait_wrong_way)
        builder.add_edge("check_rules", "tell_and_wait")
        builder.add_edge("tell_and_wait", "refund")
        return builder
    builder.add_node("tell_customer", tell_customer)
    builder.add_edge("check_rules", "tell_customer")
    builder.add_edge("tell_customer", "refund")
    add_approval_before(
        builder,
        "refund",
        name="wait_for_manager",
        request=lambda s: {
            "order": s["order_id"],
            "amount": s["amount"],
            "customer": s["customer"],
        },
        authorize=authorize,
        revalidate=revalidate,
    )
    return builder


# -- the processes ---------------------------------------------------------------------------


def event(dsn: str, thread: str, name: str) -> None:
    with db(dsn) as conn:
        conn.execute(
            "INSERT INTO northwind_events VALUES (%s, %s, %s)", (thread, name, os.getpid())
        )


def start(dsn: str, thread: str, mode: str, wrong_way: bool, hold: bool) -> None:
    """18:00: run until the approval, then (with --hold) stay up like a long-lived worker."""
    with DurablePostgresSaver.from_conn_string(dsn) as saver:
        graph = build(dsn, wrong_way=wrong_way).compile(checkpointer=saver)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            graph.invoke(
                {"thread": thread, "order_id": "8890", "amount": 420, "log": []},
                {"configurable": {"thread_id": thread}},
                durability=mode,  # type: ignore[arg-type]
            )
        for warning in caught:
            print(f"guard: {warning.message}", file=sys.stderr)
    event(dsn, thread, "waiting")
    while hold:  # a worker that stays up until the deploy kills it
        time.sleep(1)


def approve(dsn: str, thread: str, mode: str, approver: str, wrong_way: bool) -> None:
    """09:00: the manager's decision, from a fresh process."""
    decision = {"approved": True, "approver": approver, "comment": "ok"}
    with DurablePostgresSaver.from_conn_string(dsn) as saver:
        graph = build(dsn, wrong_way=wrong_way).compile(checkpointer=saver)
        if wrong_way:
            from langgraph.types import Command

            result = graph.invoke(
                Command(resume=decision),
                {"configurable": {"thread_id": thread}},
                durability=mode,  # type: ignore[arg-type]
            )
        else:
            result = resume_approval(graph, thread, decision, durability=mode)
    print(json.dumps({k: result.get(k) for k in ("approval_outcome", "payment_id", "log")}))


def report(dsn: str, thread: str) -> dict[str, Any]:
    with db(dsn) as conn:
        emails = conn.execute(
            "SELECT subject, at FROM northwind_emails WHERE thread_id = %s ORDER BY id", (thread,)
        ).fetchall()
        payments = conn.execute(
            "SELECT amount, idempotency_key, at FROM northwind_payments WHERE order_id = '8890' "
            "ORDER BY id"
        ).fetchall()
    return {
        "emails": [f"{at:%H:%M} {subject}" for subject, at in emails],
        "refunds": [f"{at:%H:%M} ${amount} key={key}" for amount, key, at in payments],
    }


def reset_world(dsn: str) -> None:
    with db(dsn) as conn:
        conn.execute(SCHEMA)
        conn.execute("DELETE FROM northwind_payments WHERE order_id = '8890'")
        # The refund's business key, refund:8890, holds across threads: a new demo starts a
        # new world, so it forgets the last demo's refund too.
        conn.execute("DELETE FROM langgraph_durable_effects WHERE key = 'refund:8890'")
        conn.execute(
            "INSERT INTO northwind_orders VALUES ('8890', 'ana@example.com', 420, 0) "
            "ON CONFLICT (order_id) DO UPDATE SET refunded = 0"
        )


def run_story(dsn: str, mode: str, wrong_way: bool) -> int:
    with DurablePostgresSaver.from_conn_string(dsn) as saver:
        saver.setup()
    reset_world(dsn)
    thread = f"northwind-{uuid.uuid4().hex[:8]}"
    me = [sys.executable, __file__, "--mode", mode, "--thread", thread]  # DSN: from the env
    if wrong_way:
        me.append("--wrong-way")
    set_clock(dsn, "18:00")
    worker = subprocess.Popen([*me, "start", "--hold"])
    with db(dsn) as conn:
        for _ in range(600):
            if conn.execute(
                "SELECT 1 FROM northwind_events WHERE thread_id = %s AND event = 'waiting'",
                (thread,),
            ).fetchone():
                break
            time.sleep(0.05)
        else:
            worker.kill()
            raise TimeoutError("the worker never reached the approval")
    print(f"18:00 worker {worker.pid} is waiting for the manager")
    set_clock(dsn, "02:00", day=2)
    os.kill(worker.pid, signal.SIGKILL)
    worker.wait()
    print(f"02:00 worker {worker.pid} SIGKILLed for a deploy")
    set_clock(dsn, "09:00", day=2)
    done = subprocess.run([*me, "approve", "--approver", "manager-ana"], check=True)
    print(f"09:00 the manager approved from a new process (exit {done.returncode})")
    found = report(dsn, thread)
    print(json.dumps(found, indent=2))
    ok = len(found["emails"]) == 2 and len(found["refunds"]) == 1
    print("customer emailed once per step and refunded once:", "yes" if ok else "NO")
    return 0 if ok else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dsn")
    parser.add_argument("--mode", default="sync", choices=["sync", "async", "exit"])
    parser.add_argument("--thread")
    parser.add_argument("--wrong-way", action="store_true")
    commands = ["story", "start", "approve", "manual-refund", "report"]
    parser.add_argument("command", nargs="?", default="story", choices=commands)
    parser.add_argument("--hold", action="store_true")
    parser.add_argument("--approver", default="manager-ana")
    args = parser.parse_args()
    dsn, embedded = demo_database(args.dsn)
    try:
        if args.command == "story":
            print(demo_note(embedded))
            return run_story(dsn, args.mode, args.wrong_way)
        if args.command == "start":
            start(dsn, args.thread, args.mode, args.wrong_way, args.hold)
        elif args.command == "approve":
            approve(dsn, args.thread, args.mode, args.approver, args.wrong_way)
        elif args.command == "manual-refund":
            print(payment_refund(dsn, "8890", 420, None))
        elif args.command == "report":
            print(json.dumps(report(dsn, args.thread)))
        return 0
    finally:
        if embedded is not None:
            embedded.stop()


if __name__ == "__main__":
    sys.exit(main())
