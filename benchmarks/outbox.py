"""Outbox relay against the same broker client publishing directly, and commit-to-consumer
latency, on RabbitMQ.

    python benchmarks/outbox.py --dsn DSN [--events 2000] [--url amqp://guest:guest@127.0.0.1:5672/]

1. Throughput: `events` events committed with `emit_txn` (50 keys), then one relay drains
   them through `RabbitMQPublisher` (publisher confirms); against the same publisher
   publishing the same number of messages directly. Printed as events/s and the ratio
   (issue 13's goal: at least half the direct rate).
2. Latency: a running relay (woken by NOTIFY), one event committed at a time; the time
   from the commit returning to the consumer receiving the message; p50 and p99 (goal:
   p50 under 10 ms on a local broker).

Needs a database where `setup()` may run and a RabbitMQ server.

Measured 2026-12-03 on a shared 2-CPU Linux VM (local Postgres and RabbitMQ, other jobs
running): relay 752 events/s against 988 direct (ratio 0.76); latency p50 8.5 ms, p99
22.7 ms. aio-pika prints "Task was destroyed but it is pending" noise at exit.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import statistics
import time
import uuid

import aio_pika
import psycopg

from langgraph_durable import DurablePostgresSaver
from langgraph_durable.outbox import OutboxEvent, OutboxRelay, emit_txn
from langgraph_durable.outbox.publishers import RabbitMQPublisher


async def throughput(dsn: str, url: str, events: int) -> tuple[float, float]:
    queue_name = f"bench-{uuid.uuid4()}"
    async with await aio_pika.connect_robust(url) as connection:
        channel = await connection.channel()
        await channel.declare_queue(queue_name, auto_delete=True)
        with psycopg.connect(dsn, autocommit=True) as conn, conn.transaction():
            for n in range(events):
                emit_txn(conn, "bench.event", {"n": n}, key=f"k{n % 50}")
        publisher = RabbitMQPublisher(url, routing_key=queue_name)
        relay = OutboxRelay(dsn, publisher, keys=50, batch=1000)
        start = time.perf_counter()
        while (await relay.run_once()).claimed:
            pass
        relay_rate = events / (time.perf_counter() - start)
        await relay.aclose()
        start = time.perf_counter()
        for n in range(events):
            await publisher.publish(
                OutboxEvent(str(uuid.uuid4()), "bench.event", f"k{n % 50}", {"n": n}, seq=n)
            )
        direct_rate = events / (time.perf_counter() - start)
        await publisher.aclose()
    return relay_rate, direct_rate


async def latency(dsn: str, url: str, samples: int) -> list[float]:
    queue_name = f"bench-{uuid.uuid4()}"
    found: list[float] = []
    async with await aio_pika.connect_robust(url) as connection:
        channel = await connection.channel()
        queue = await channel.declare_queue(queue_name, auto_delete=True)
        publisher = RabbitMQPublisher(url, routing_key=queue_name)
        relay = OutboxRelay(dsn, publisher)
        stop = asyncio.Event()
        running = asyncio.create_task(relay.run(stop))
        async with queue.iterator() as messages:
            with psycopg.connect(dsn, autocommit=True) as conn:
                for n in range(samples):
                    emit_txn(conn, "bench.latency", {"n": n}, key="latency")
                    committed = time.perf_counter()
                    async for message in messages:
                        await message.ack()
                        found.append((time.perf_counter() - committed) * 1000)
                        break
        stop.set()
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("SELECT pg_notify('langgraph_durable_outbox', '')")
        await running
        await publisher.aclose()
    return found


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dsn", default=os.environ.get("LANGGRAPH_DURABLE_DSN", ""))
    parser.add_argument("--url", default="amqp://guest:guest@127.0.0.1:5672/")
    parser.add_argument("--events", type=int, default=2000)
    parser.add_argument("--samples", type=int, default=300)
    args = parser.parse_args()
    with DurablePostgresSaver.from_conn_string(args.dsn) as saver:
        saver.setup()
    print(
        f"machine: {platform.platform()}, {os.cpu_count()} CPUs, python {platform.python_version()}"
    )
    relay_rate, direct_rate = asyncio.run(throughput(args.dsn, args.url, args.events))
    print(
        f"throughput: relay {relay_rate:.0f} events/s, direct {direct_rate:.0f} msgs/s, "
        f"ratio {relay_rate / direct_rate:.2f} (goal >= 0.5)"
    )
    found = sorted(asyncio.run(latency(args.dsn, args.url, args.samples)))
    p50 = statistics.median(found)
    p99 = found[min(len(found) - 1, int(len(found) * 0.99))]
    print(f"commit-to-consumer latency: p50 {p50:.2f} ms, p99 {p99:.2f} ms (goal p50 < 10 ms)")


if __name__ == "__main__":
    main()
