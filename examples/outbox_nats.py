"""Outbox to NATS JetStream: a graph's events commit with its steps; a consumer acts once.

    LANGGRAPH_DURABLE_DSN=postgresql://... python examples/outbox_nats.py [NATS_URL]

A two-node graph emits `order.paid` and `order.shipped`; the relay publishes them to a
stream with `Nats-Msg-Id` set to the event id (the stream drops a republished event within
its duplicate window). The consumer records each message id in its inbox in the same
transaction as its own work, so a redelivered message does nothing. Exit 0 means it held.
"""

from __future__ import annotations

import asyncio
import sys
import uuid
from typing import Any
from urllib.parse import unquote

import nats
import psycopg
from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict

from langgraph_durable import DurablePostgresSaver, emit
from langgraph_durable.embedded import demo_database
from langgraph_durable.outbox import OutboxRelay, inbox_record_txn
from langgraph_durable.outbox.publishers import NatsPublisher


class Order(TypedDict, total=False):
    order_id: str


def pay(state: Order) -> Order:
    emit("order.paid", {"order": state["order_id"]}, key=state["order_id"])
    return {}


def ship(state: Order) -> Order:
    emit("order.shipped", {"order": state["order_id"]}, key=state["order_id"])
    return {}


def event_type_of(headers: dict[str, str]) -> str:
    """The event type a message's headers carry: percent-encoded when the message says so
    (`event-headers-encoding: percent`), as sent by an older relay otherwise."""
    if headers.get("event-headers-encoding") == "percent":
        return unquote(headers["event-type"])
    return headers["event-type"]


def consume(dsn: str, message: Any) -> bool:
    """The consumer's work and its inbox row commit together: a redelivery does nothing."""
    with psycopg.connect(dsn) as conn, conn.transaction():
        message_id = message.headers["Nats-Msg-Id"]
        if not inbox_record_txn(conn, "shipping-emails", message_id):
            return False
        conn.execute(
            "INSERT INTO emails_sent (message_id, body) VALUES (%s, %s)",
            (message_id, message.data.decode()),
        )
        return True


async def main(dsn: str, url: str) -> int:
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
    stream, subject = f"example_{order}".replace("-", "_"), f"orders.{order}"
    client = await nats.connect(url)
    js = client.jetstream()
    await js.add_stream(name=stream, subjects=[subject])
    try:
        publisher = NatsPublisher(url, subject=subject)
        relay = OutboxRelay(dsn, publisher)
        while (await relay.run_once()).claimed:
            pass
        consumer = await js.pull_subscribe(subject, durable="emails", stream=stream)
        messages: list[Any] = []
        while len(messages) < 2:
            messages += await consumer.fetch(2 - len(messages))
        # The first message once more: JetStream redelivers what was not acknowledged.
        acted = [consume(dsn, m) for m in messages] + [consume(dsn, messages[0])]
        for message in messages:
            await message.ack()
        await relay.aclose()
        await publisher.aclose()
    finally:
        await js.delete_stream(stream)
        await client.close()
    # The type and key headers are percent-encoded UTF-8, as NATS headers trim values and
    # turn line breaks into spaces; `event-headers-encoding: percent` says so (a message
    # published before the encoding lacks it, its headers as sent).
    messages_types = [event_type_of(m.headers) for m in messages]
    print(f"{order}: received {messages_types}, acted {acted}")
    return 0 if acted == [True, True, False] else 1


if __name__ == "__main__":
    dsn, embedded = demo_database()
    try:
        url = sys.argv[1] if len(sys.argv) > 1 else "nats://127.0.0.1:4222"
        sys.exit(asyncio.run(main(dsn, url)))
    finally:
        if embedded is not None:
            embedded.stop()
