"""A worker process for the fleet crash tests: takes runs of the "orders" graph until killed.

    python tests/crash/run_worker.py DSN [--lease SECONDS] [--create N] [--poison]

The graph: reserve -> charge -> notify -> done, each side effect an `@effect` on a
receiver table of its own, written on its own autocommit connection (the outside world;
it survives the worker):

- reserve: the warehouse honours the idempotency key (UNIQUE key): `retry="idempotent"`;
- charge: the payment service does not dedupe, but can be asked by key: a `reconcile` hook;
- notify: the mailer likewise, with a hook.

Every call that reaches a receiver is logged in `fleet_calls`. The test makes workers die
with `LANGGRAPH_DURABLE_CRASH_AT` (any named crash point: `run:after_claim`,
`effect:after_call`, `put:after_commit`, ...) and `LANGGRAPH_DURABLE_CRASH_AFTER`.

`--create N` only creates N runs (one thread each) and prints their ids as JSON. Runs of
the fleet are given many attempts: the fleet proves recovery, and random kills may hit one
run several times.

`--poison` runs the "poison" graph instead, whose only node logs its execution in
`poison_calls` and then SIGKILLs its own worker: a run that kills every worker that takes
it (with `--create N`: N such runs, 2 attempts each).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
from typing import Any

import psycopg
from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict

from langgraph_durable import (
    DurablePostgresSaver,
    GraphVersion,
    Reconciled,
    RunRegistry,
    Worker,
    effect,
)

RECEIVERS_DDL = """
CREATE TABLE IF NOT EXISTS fleet_reservations (key TEXT PRIMARY KEY, order_id TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS fleet_charges (
    id SERIAL PRIMARY KEY, key TEXT NOT NULL, order_id TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS fleet_mails (
    id SERIAL PRIMARY KEY, key TEXT NOT NULL, order_id TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS fleet_calls (
    id SERIAL PRIMARY KEY, receiver TEXT NOT NULL, key TEXT NOT NULL, pid INT NOT NULL);
CREATE TABLE IF NOT EXISTS poison_calls (
    id SERIAL PRIMARY KEY, order_id TEXT NOT NULL, pid INT NOT NULL);
"""
POISON_ATTEMPTS = 2
FLEET_ATTEMPTS = 1000


class Order(TypedDict, total=False):
    order_id: str
    reservation: str
    charge: int
    mail: int


def ensure_receivers(dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn, conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(hashtext('fleet receivers'))")
        conn.execute(RECEIVERS_DDL)


def build(saver: DurablePostgresSaver, dsn: str) -> GraphVersion:
    def world(sql: str, *params: Any) -> list[Any]:
        with psycopg.connect(dsn, autocommit=True) as conn:
            cur = conn.execute(sql, params)
            return cur.fetchall() if cur.description else []

    def called(receiver: str, key: str) -> None:
        world(
            "INSERT INTO fleet_calls (receiver, key, pid) VALUES (%s, %s, %s)",
            receiver,
            key,
            os.getpid(),
        )

    @effect(name="fleet.reserve", retry="idempotent")
    def reserve(order_id: str, idempotency_key: str = "") -> str:
        called("warehouse", idempotency_key)
        world(
            "INSERT INTO fleet_reservations VALUES (%s, %s) ON CONFLICT (key) DO NOTHING",
            idempotency_key,
            order_id,
        )
        return idempotency_key

    def found(table: str) -> Any:
        def look(idempotency_key: str, order_id: str) -> Reconciled:
            rows = world(f"SELECT id FROM {table} WHERE key = %s", idempotency_key)
            return Reconciled.completed(rows[0][0]) if rows else Reconciled.absent()

        return look

    @effect(name="fleet.charge", reconcile=found("fleet_charges"))
    def charge(order_id: str, idempotency_key: str = "") -> int:
        called("payments", idempotency_key)
        rows = world(
            "INSERT INTO fleet_charges (key, order_id) VALUES (%s, %s) RETURNING id",
            idempotency_key,
            order_id,
        )
        return int(rows[0][0])

    @effect(name="fleet.notify", reconcile=found("fleet_mails"))
    def notify(order_id: str, idempotency_key: str = "") -> int:
        called("mailer", idempotency_key)
        rows = world(
            "INSERT INTO fleet_mails (key, order_id) VALUES (%s, %s) RETURNING id",
            idempotency_key,
            order_id,
        )
        return int(rows[0][0])

    builder = StateGraph(Order)
    builder.add_node("reserve", lambda s: {"reservation": reserve(s["order_id"])})
    builder.add_node("charge", lambda s: {"charge": charge(s["order_id"])})
    builder.add_node("notify", lambda s: {"mail": notify(s["order_id"])})
    builder.add_edge(START, "reserve")
    builder.add_edge("reserve", "charge")
    builder.add_edge("charge", "notify")
    builder.add_edge("notify", END)
    return GraphVersion("orders", "1", builder.compile(checkpointer=saver))


def build_poison(saver: DurablePostgresSaver, dsn: str) -> GraphVersion:
    def swallow(state: Order) -> Order:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(
                "INSERT INTO poison_calls (order_id, pid) VALUES (%s, %s)",
                (state["order_id"], os.getpid()),
            )
        os.kill(os.getpid(), signal.SIGKILL)
        raise AssertionError("unreachable: the process was killed")

    builder = StateGraph(Order)
    builder.add_node("swallow", swallow)
    builder.add_edge(START, "swallow")
    builder.add_edge("swallow", END)
    return GraphVersion("poison", "1", builder.compile(checkpointer=saver))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("dsn")
    parser.add_argument("--lease", type=float, default=2.0)
    parser.add_argument("--create", type=int)
    parser.add_argument("--poison", action="store_true")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    ensure_receivers(args.dsn)
    with DurablePostgresSaver.from_conn_string(args.dsn) as saver:
        saver.setup()
        graph = build_poison(saver, args.dsn) if args.poison else build(saver, args.dsn)
        if args.create is not None:
            runs = RunRegistry(saver)
            attempts = POISON_ATTEMPTS if args.poison else FLEET_ATTEMPTS
            ids = [
                runs.create(graph, {"order_id": f"o-{i}"}, max_attempts=attempts).run_id
                for i in range(args.create)
            ]
            print(json.dumps(ids), flush=True)
            return 0
        worker = Worker(saver, [graph], lease_seconds=args.lease, idle_wait=0.5)
        print(f"worker {os.getpid()} ready", flush=True)
        worker.run_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
