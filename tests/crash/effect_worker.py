"""A worker process for effect crash tests: fetch -> create_deal -> notify -> done.

    python tests/crash/effect_worker.py DSN THREAD MODE FLAVOR
        [--crm idempotent|reconcile] [--resume] [--kill-during crm|mailer]

`create_deal` calls an `@effect` on the "crm" receiver and `notify` one on the "mailer".
Both receivers are tables in the same database, written on their own autocommit
connections: they are the outside world, and they survive the worker's death.

- crm (`crm_deals`): honours the idempotency key; the key is the deal's `external_id`
  (UNIQUE), so a repeated call returns the existing deal instead of creating one. The
  effect runs with `retry="idempotent"` or with a `reconcile=` hook that looks the deal up
  by `external_id` (`--crm`).
- mailer (`mails`): does not honour keys; every call is a new mail. Its effect has no hook
  and the default policy, so an unknown outcome stops the run.

Every call that reaches a receiver is also logged in `receiver_calls` (same transaction).
`--kill-during RECEIVER` SIGKILLs the process inside the effect, after the receiver
committed and before the effect returns. The runner's crash points come from
`LANGGRAPH_DURABLE_CRASH_AT` / `LANGGRAPH_DURABLE_CRASH_AFTER` (create_deal's effect passes
each point first, notify's second). Effect leases are 300 s, so a resumed worker can only
take over early by seeing that the lease owner's process is dead.

Exit codes: 0 finished (the final state is printed as JSON), 3 EmptyInputError (nothing was
saved: send the input again), 4 EffectOutcomeUnknown (prints `unknown-key: KEY`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import operator
import os
import signal
import sys
from collections.abc import Callable
from typing import Annotated, Any

import psycopg
from langgraph.errors import EmptyInputError
from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict

from langgraph_durable import (
    AsyncDurablePostgresSaver,
    DurablePostgresSaver,
    EffectOutcomeUnknown,
    Reconciled,
    effect,
)

CRM_EFFECT = "crash.crm.create_deal"
MAILER_EFFECT = "crash.mailer.send"
LEASE_TTL = 300.0
EXIT_EMPTY_INPUT = 3
EXIT_OUTCOME_UNKNOWN = 4

RECEIVERS_DDL = [
    "CREATE TABLE IF NOT EXISTS crm_deals ("
    " id SERIAL PRIMARY KEY, external_id TEXT NOT NULL UNIQUE, thread_id TEXT NOT NULL,"
    " customer TEXT NOT NULL, amount INT NOT NULL, pid INT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS mails ("
    " id SERIAL PRIMARY KEY, key TEXT NOT NULL, thread_id TEXT NOT NULL,"
    " recipient TEXT NOT NULL, body TEXT NOT NULL, pid INT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS receiver_calls ("
    " id SERIAL PRIMARY KEY, receiver TEXT NOT NULL, thread_id TEXT NOT NULL,"
    " key TEXT NOT NULL, pid INT NOT NULL)",
]

CALL_SQL = "INSERT INTO receiver_calls (receiver, thread_id, key, pid) VALUES (%s, %s, %s, %s)"
DEAL_SQL = (
    "INSERT INTO crm_deals (external_id, thread_id, customer, amount, pid)"
    " VALUES (%s, %s, %s, %s, %s) ON CONFLICT (external_id) DO NOTHING RETURNING id"
)
FIND_DEAL_SQL = "SELECT id FROM crm_deals WHERE external_id = %s"
MAIL_SQL = (
    "INSERT INTO mails (key, thread_id, recipient, body, pid)"
    " VALUES (%s, %s, %s, %s, %s) RETURNING id"
)


class State(TypedDict, total=False):
    customer: str
    amount: int
    email: str
    deal: dict[str, Any]
    mail: dict[str, Any]
    log: Annotated[list[str], operator.add]


def ensure_receivers(dsn: str) -> None:
    """Create the receiver tables once, even with several workers starting together."""
    with psycopg.connect(dsn, autocommit=True) as conn, conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(hashtext('effect_worker_receivers'))")
        for ddl in RECEIVERS_DDL:
            conn.execute(ddl)


def die_if(kill_during: str | None, receiver: str) -> None:
    """The receiver has committed; the process dies before the effect can return."""
    if kill_during == receiver:
        sys.stdout.flush()
        os.kill(os.getpid(), signal.SIGKILL)


def deal_result(deal_id: int, key: str) -> dict[str, Any]:
    return {"deal_id": deal_id, "external_id": key}


def fetch(state: State) -> dict[str, Any]:
    customer = state["customer"]
    return {"amount": 100 + len(customer), "email": f"{customer}@example.com", "log": ["fetch"]}


def done(state: State) -> dict[str, Any]:
    return {"log": ["done"]}


def sync_nodes(
    dsn: str, thread: str, crm: str, kill_during: str | None
) -> tuple[Callable[..., Any], Callable[..., Any]]:
    """create_deal and notify, with sync effects on sync connections."""

    def find_deal(idempotency_key: str, customer: str, amount: int) -> Reconciled:
        with psycopg.connect(dsn, autocommit=True) as conn:
            row = conn.execute(FIND_DEAL_SQL, (idempotency_key,)).fetchone()
        if row is None:
            return Reconciled.absent()
        return Reconciled.completed(deal_result(row[0], idempotency_key))

    @effect(
        name=CRM_EFFECT,
        lease_ttl=LEASE_TTL,
        retry="idempotent" if crm == "idempotent" else None,
        reconcile=find_deal if crm == "reconcile" else None,
    )
    def create_in_crm(customer: str, amount: int, idempotency_key: str = "") -> dict[str, Any]:
        with psycopg.connect(dsn, autocommit=True) as conn, conn.transaction():
            conn.execute(CALL_SQL, ("crm", thread, idempotency_key, os.getpid()))
            row = conn.execute(
                DEAL_SQL, (idempotency_key, thread, customer, amount, os.getpid())
            ).fetchone()
            if row is None:  # the key was seen before: the receiver returns that deal
                row = conn.execute(FIND_DEAL_SQL, (idempotency_key,)).fetchone()
        assert row is not None
        die_if(kill_during, "crm")
        return deal_result(row[0], idempotency_key)

    @effect(name=MAILER_EFFECT, lease_ttl=LEASE_TTL)
    def send_mail(recipient: str, body: str, idempotency_key: str = "") -> dict[str, Any]:
        with psycopg.connect(dsn, autocommit=True) as conn, conn.transaction():
            conn.execute(CALL_SQL, ("mailer", thread, idempotency_key, os.getpid()))
            row = conn.execute(
                MAIL_SQL, (idempotency_key, thread, recipient, body, os.getpid())
            ).fetchone()
        assert row is not None
        die_if(kill_during, "mailer")
        return {"mail_id": row[0]}

    def create_deal(state: State) -> dict[str, Any]:
        deal = create_in_crm(state["customer"], state["amount"])
        return {"deal": deal, "log": ["create_deal"]}

    def notify(state: State) -> dict[str, Any]:
        mail = send_mail(state["email"], f"deal {state['deal']['deal_id']} created")
        return {"mail": mail, "log": ["notify"]}

    return create_deal, notify


def async_nodes(
    dsn: str, thread: str, crm: str, kill_during: str | None
) -> tuple[Callable[..., Any], Callable[..., Any]]:
    """create_deal and notify, with async effects on async connections."""

    async def find_deal(idempotency_key: str, customer: str, amount: int) -> Reconciled:
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
            cur = await conn.execute(FIND_DEAL_SQL, (idempotency_key,))
            row = await cur.fetchone()
        if row is None:
            return Reconciled.absent()
        return Reconciled.completed(deal_result(row[0], idempotency_key))

    @effect(
        name=CRM_EFFECT,
        lease_ttl=LEASE_TTL,
        retry="idempotent" if crm == "idempotent" else None,
        reconcile=find_deal if crm == "reconcile" else None,
    )
    async def create_in_crm(
        customer: str, amount: int, idempotency_key: str = ""
    ) -> dict[str, Any]:
        connect = psycopg.AsyncConnection.connect(dsn, autocommit=True)
        async with await connect as conn, conn.transaction():
            await conn.execute(CALL_SQL, ("crm", thread, idempotency_key, os.getpid()))
            cur = await conn.execute(
                DEAL_SQL, (idempotency_key, thread, customer, amount, os.getpid())
            )
            row = await cur.fetchone()
            if row is None:
                cur = await conn.execute(FIND_DEAL_SQL, (idempotency_key,))
                row = await cur.fetchone()
        assert row is not None
        die_if(kill_during, "crm")
        return deal_result(row[0], idempotency_key)

    @effect(name=MAILER_EFFECT, lease_ttl=LEASE_TTL)
    async def send_mail(recipient: str, body: str, idempotency_key: str = "") -> dict[str, Any]:
        connect = psycopg.AsyncConnection.connect(dsn, autocommit=True)
        async with await connect as conn, conn.transaction():
            await conn.execute(CALL_SQL, ("mailer", thread, idempotency_key, os.getpid()))
            cur = await conn.execute(
                MAIL_SQL, (idempotency_key, thread, recipient, body, os.getpid())
            )
            row = await cur.fetchone()
        assert row is not None
        die_if(kill_during, "mailer")
        return {"mail_id": row[0]}

    async def create_deal(state: State) -> dict[str, Any]:
        deal = await create_in_crm(state["customer"], state["amount"])
        return {"deal": deal, "log": ["create_deal"]}

    async def notify(state: State) -> dict[str, Any]:
        mail = await send_mail(state["email"], f"deal {state['deal']['deal_id']} created")
        return {"mail": mail, "log": ["notify"]}

    return create_deal, notify


def build(
    dsn: str, thread: str, flavor: str, crm: str, kill_during: str | None
) -> StateGraph[Any, Any, Any, Any]:
    make = sync_nodes if flavor == "sync" else async_nodes
    create_deal, notify = make(dsn, thread, crm, kill_during)
    builder = StateGraph(State)
    builder.add_node("fetch", fetch)
    builder.add_node("create_deal", create_deal)
    builder.add_node("notify", notify)
    builder.add_node("done", done)
    builder.add_edge(START, "fetch")
    builder.add_edge("fetch", "create_deal")
    builder.add_edge("create_deal", "notify")
    builder.add_edge("notify", "done")
    builder.add_edge("done", END)
    return builder


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("dsn")
    parser.add_argument("thread")
    parser.add_argument("mode", choices=["sync", "async", "exit"])
    parser.add_argument("flavor", choices=["sync", "async"])
    parser.add_argument("--crm", choices=["idempotent", "reconcile"], default="idempotent")
    parser.add_argument("--resume", action="store_true")
    parser.add_argument("--kill-during", choices=["crm", "mailer"])
    args = parser.parse_args()
    ensure_receivers(args.dsn)
    builder = build(args.dsn, args.thread, args.flavor, args.crm, args.kill_during)
    config: Any = {"configurable": {"thread_id": args.thread}}
    # The input depends on the thread only, so sending it again is sending the same input.
    payload = None if args.resume else {"customer": f"c-{args.thread[-8:]}", "log": []}
    try:
        if args.flavor == "sync":
            with DurablePostgresSaver.from_conn_string(args.dsn) as saver:
                saver.setup()
                graph = builder.compile(checkpointer=saver)
                final = graph.invoke(payload, config, durability=args.mode)
        else:

            async def run() -> Any:
                async with AsyncDurablePostgresSaver.from_conn_string(args.dsn) as saver:
                    await saver.setup()
                    graph = builder.compile(checkpointer=saver)
                    return await graph.ainvoke(payload, config, durability=args.mode)

            final = asyncio.run(run())
    except EmptyInputError:
        return EXIT_EMPTY_INPUT
    except EffectOutcomeUnknown as exc:
        print(f"unknown-key: {exc.key}", flush=True)
        return EXIT_OUTCOME_UNKNOWN
    print(json.dumps(final, sort_keys=True), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
