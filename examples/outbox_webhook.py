"""Outbox to a signed webhook: a graph's events commit with its steps; a receiver acts once.

    LANGGRAPH_DURABLE_DSN=postgresql://... python examples/outbox_webhook.py

A two-node graph emits `order.paid` and `order.shipped`; the relay POSTs them to a local
receiver, signed as Standard Webhooks specifies (`webhook-id`, `webhook-timestamp`,
`webhook-signature: v1,<base64 HMAC-SHA256>`, a `whsec_` secret), so any Standard
Webhooks library could check it. The receiver checks it with `verify_webhook` and
records each message id in its inbox in the same transaction as its own work; the relay
then delivers the first event again, and the receiver answers without acting. Exit code
0 means it held.
"""

from __future__ import annotations

import asyncio
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import psycopg
from _outbox_demo import first_event
from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict

from langgraph_durable import DurablePostgresSaver, emit
from langgraph_durable.embedded import demo_database
from langgraph_durable.outbox import OutboxRelay, inbox_record_txn, verify_webhook
from langgraph_durable.outbox.publishers import WebhookPublisher

SECRET = "whsec_c2hhcmUgdGhpcyB3aXRoIHRoZSByZWNlaXZlciBvbmx5"  # `whsec_`, then the key in base64


class Order(TypedDict, total=False):
    order_id: str


def pay(state: Order) -> Order:
    emit("order.paid", {"order": state["order_id"]}, key=state["order_id"])
    return {}


def ship(state: Order) -> Order:
    emit("order.shipped", {"order": state["order_id"]}, key=state["order_id"])
    return {}


def consume(dsn: str, message_id: str, body: bytes) -> bool:
    """The receiver's work and its inbox row commit together: a redelivery does nothing."""
    with psycopg.connect(dsn) as conn, conn.transaction():
        if not inbox_record_txn(conn, "shipping-emails", message_id):
            return False
        conn.execute(
            "INSERT INTO emails_sent (message_id, body) VALUES (%s, %s)",
            (message_id, body.decode()),
        )
        return True


def receiver(dsn: str, acted: list[bool]) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            del format, args

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["content-length"]))
            try:
                message_id = verify_webhook(SECRET, self.headers, body, now=time.time())
            except ValueError:
                self.send_response(401)  # not from the holder of the secret, or a replay
                self.end_headers()
                return
            acted.append(consume(dsn, message_id, body))
            self.send_response(204)
            self.end_headers()

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


async def main(dsn: str) -> int:
    with DurablePostgresSaver.from_conn_string(dsn) as saver:
        saver.setup()
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS emails_sent (message_id TEXT, body TEXT)")
    with DurablePostgresSaver.from_conn_string(dsn) as saver:
        graph = StateGraph(Order)
        graph.add_node("pay", pay)
        graph.add_node("ship", ship)
        graph.add_edge(START, "pay")
        graph.add_edge("pay", "ship")
        graph.add_edge("ship", END)
        order = f"order-{uuid.uuid4().hex[:8]}"
        graph.compile(checkpointer=saver).invoke(
            {"order_id": order}, {"configurable": {"thread_id": order}}, durability="sync"
        )
    acted: list[bool] = []
    server = receiver(dsn, acted)
    url = f"http://127.0.0.1:{server.server_address[1]}/orders"
    publisher = WebhookPublisher(url, SECRET)
    relay = OutboxRelay(dsn, publisher)
    while (await relay.run_once()).claimed:
        pass
    # The first event once more, as a relay killed before marking it would send it.
    await publisher.publish(first_event(dsn, order, "order.paid"))
    await relay.aclose()
    await publisher.aclose()
    server.shutdown()
    print(f"{order}: acted {acted}")
    return 0 if acted == [True, True, False] else 1


if __name__ == "__main__":
    dsn, embedded = demo_database()
    try:
        sys.exit(asyncio.run(main(dsn)))
    finally:
        if embedded is not None:
            embedded.stop()
