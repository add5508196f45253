"""Outbox to RabbitMQ: a graph's events commit with its steps; a consumer acts once each.

    LANGGRAPH_DURABLE_DSN=postgresql://... python examples/outbox_rabbitmq.py [AMQP_URL]

A two-node graph emits `order.paid` and `order.shipped`; the relay publishes them with
publisher confirms; the first one is then published again (as a relay killed before
marking it would), so the broker holds three messages, and the consumer, which records
each message id in its inbox in the same transaction as its own work, acts on each event
once. Exit code 0 means it held.
"""

from __future__ import annotations

import asyncio
import sys
import uuid
from typing import Any

import aio_pika
import psycopg
from _outbox_demo import first_event
from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict

from langgraph_durable import DurablePostgresSaver, emit
from langgraph_durable.embedded import demo_database
from langgraph_durable.outbox import OutboxRelay, inbox_record_txn
from langgraph_durable.outbox.publishers import RabbitMQPublisher


class Order(TypedDict, total=False):
    order_id: str


def pay(state: Order) -> Order:
    emit("order.paid", {"order": state["order_id"]}, key=state["order_id"])
    return {}


def ship(state: Order) -> Order:
    emit("order.shipped", {"order": state["order_id"]}, key=state["order_id"])
    return {}


def consume(dsn: str, message: Any) -> bool:
    """The consumer's work and its inbox row commit together: a redelivery does nothing."""
    with psycopg.connect(dsn) as conn, conn.transaction():
        if not inbox_record_txn(conn, "shipping-emails", message.message_id):
            return False
        conn.execute(
            "INSERT INTO emails_sent (message_id, body) VALUES (%s, %s)",
            (message.message_id, message.body.decode()),
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
    queue_name = f"outbox-example-{order}"
    async with await aio_pika.connect_robust(url) as connection:
        channel = await connection.channel()
        queue = await channel.declare_queue(queue_name, auto_delete=True)
        publisher = RabbitMQPublisher(url, routing_key=queue_name)
        relay = OutboxRelay(dsn, publisher)
        while (await relay.run_once()).claimed:
            pass
        # The first event once more, as a relay killed before marking it would publish it.
        await publisher.publish(first_event(dsn, order, "order.paid"))
        messages = []
        async with queue.iterator() as incoming:
            async for message in incoming:
                async with message.process():
                    messages.append(message)
                if len(messages) == 3:
                    break
        acted = [consume(dsn, m) for m in messages]
        await relay.aclose()
        await publisher.aclose()
    print(f"{order}: received {[m.type for m in messages]}, acted {acted}")
    return 0 if acted == [True, True, False] else 1


if __name__ == "__main__":
    dsn, embedded = demo_database()
    try:
        url = sys.argv[1] if len(sys.argv) > 1 else "amqp://guest:guest@127.0.0.1:5672/"
        sys.exit(asyncio.run(main(dsn, url)))
    finally:
        if embedded is not None:
            embedded.stop()
