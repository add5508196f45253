"""Outbox events under SIGKILL (invariant I7).

- A worker killed before or after a step's commit: the outbox holds an event for exactly
  the nodes whose result committed (as writes, or in the checkpoint under "exit"); after
  resuming, every node's event is there once (under "async" a node whose writes landed
  against a checkpoint the crash lost runs again and emits the same event id, stored once).
- A relay killed between publishing and marking published: the next relay publishes the
  same events again under the same ids, the receiver sees the redelivery, and its inbox
  makes the work happen once. Nothing is lost.
- A relay frozen mid-round (SIGSTOP) loses its session once it has been idle in the
  round's transaction past its limit, and another relay publishes its keys.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from outbox_receivers import WebhookReceiver, consume, need_broker, work_done

from langgraph_durable import DurablePostgresSaver
from langgraph_durable.outbox import OutboxEvent, OutboxRelay, backlog, emit_txn
from langgraph_durable.outbox.publishers import CallbackPublisher

pytestmark = pytest.mark.crash

ROOT = Path(__file__).resolve().parents[2]
WORKER = Path(__file__).with_name("outbox_worker.py")
NODES = ["n1", "n2", "n3"]


def run(args: list[str], crash_at: str | None = None, crash_after: int = 0) -> int:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LANGGRAPH_DURABLE_CRASH")}
    env["LANGGRAPH_DURABLE_WEBHOOK_SECRET"] = "s3cret"
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    if crash_at:
        env["LANGGRAPH_DURABLE_CRASH_AT"] = crash_at
        env["LANGGRAPH_DURABLE_CRASH_AFTER"] = str(crash_after)
    done = subprocess.run(
        [sys.executable, str(WORKER), *args], env=env, capture_output=True, text=True, timeout=120
    )
    if done.returncode not in (0, 3, -signal.SIGKILL):
        raise AssertionError(f"worker failed ({done.returncode}):\n{done.stderr}")
    return done.returncode


@pytest.fixture
def dsn(fresh_db_dsn: str) -> str:
    with DurablePostgresSaver.from_conn_string(fresh_db_dsn) as saver:
        saver.setup()
    with psycopg.connect(fresh_db_dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE consumer_work (message_id TEXT, body JSONB)")
    return fresh_db_dsn


def committed_nodes(dsn: str, thread: str) -> list[str]:
    """Nodes whose result is committed: in the latest checkpoint's state, or as writes."""
    with DurablePostgresSaver.from_conn_string(dsn) as saver:
        found = saver.get_tuple({"configurable": {"thread_id": thread}})
        in_state = set(found.checkpoint["channel_values"].get("log", [])) if found else set()
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT DISTINCT split_part(task_path, ', ', 2) FROM checkpoint_writes"
            " WHERE thread_id = %s AND channel = 'log' AND task_path NOT LIKE '%%__start__'",
            (thread,),
        ).fetchall()
    return sorted(in_state | {r[0] for r in rows})


def event_nodes(dsn: str, thread: str) -> list[str]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT payload->>'node' FROM langgraph_durable_outbox WHERE thread_id = %s",
            (thread,),
        ).fetchall()
    return sorted(r[0] for r in rows)


CASES = [
    ("sync", "put:after_commit", 1),
    ("sync", "put:after_commit", 2),
    ("sync", "put_writes:parked", 0),
    ("sync", "put_writes:parked", 1),
    ("sync", "put_writes:after_commit", 1),
    ("async", "put:after_commit", 2),
    ("async", "put_writes:after_commit", 0),
    ("exit", "put:after_commit", 0),
]


@pytest.mark.parametrize("flavor", ["sync", "async"])
@pytest.mark.parametrize(("mode", "crash_at", "after"), CASES)
def test_a_killed_worker_leaves_events_for_exactly_the_committed_tasks(
    dsn: str, flavor: str, mode: str, crash_at: str, after: int
) -> None:
    thread = f"outbox-crash-{uuid.uuid4()}"
    code = run(["graph", dsn, thread, mode, flavor], crash_at, after)
    assert code == -signal.SIGKILL
    # An event for each node whose result committed, and for no other.
    assert event_nodes(dsn, thread) == committed_nodes(dsn, thread)
    code = run(["graph", dsn, thread, mode, flavor, "--resume"])
    if code == 3:  # nothing was saved: the input is sent again
        assert event_nodes(dsn, thread) == []
        assert run(["graph", dsn, thread, mode, flavor]) == 0
    assert event_nodes(dsn, thread) == NODES


@pytest.fixture
def receiver(dsn: str) -> Iterator[WebhookReceiver]:
    found = WebhookReceiver(dsn, b"s3cret")
    yield found
    found.close()


def test_a_relay_killed_before_marking_republishes_and_the_inbox_drops_the_repeat(
    dsn: str, receiver: WebhookReceiver
) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn, conn.transaction():
        ids = [emit_txn(conn, "test.event", {"n": n}, key=f"k{n % 2}") for n in range(6)]
    code = run(["relay", dsn, receiver.url], crash_at="relay:after_publish")
    assert code == -signal.SIGKILL
    delivered_before = list(receiver.deliveries)
    assert sorted(delivered_before) == sorted(ids)
    with psycopg.connect(dsn) as conn:
        assert backlog(conn)["pending"] == 6  # published, never marked
    assert run(["relay", dsn, receiver.url]) == 0
    assert sorted(receiver.deliveries) == sorted(ids + ids)
    assert sorted(work_done(dsn)) == sorted(ids)
    with psycopg.connect(dsn) as conn:
        assert backlog(conn)["pending"] == 0
    # Order per key held on both deliveries.
    for key_ids in (ids[0::2], ids[1::2]):
        first = [i for i in receiver.deliveries[:6] if i in key_ids]
        second = [i for i in receiver.deliveries[6:] if i in key_ids]
        assert first == key_ids == second


async def test_a_relay_killed_before_marking_redelivers_on_rabbitmq_and_the_inbox_drops_it(
    dsn: str,
) -> None:
    need_broker("RabbitMQ", 5672)
    import aio_pika

    url = "amqp://guest:guest@127.0.0.1:5672/"
    queue_name = f"outbox-crash-{uuid.uuid4()}"
    with psycopg.connect(dsn, autocommit=True) as conn, conn.transaction():
        ids = [emit_txn(conn, "test.event", {"n": n}, key="k") for n in range(4)]
    async with await aio_pika.connect_robust(url) as connection:
        channel = await connection.channel()
        queue = await channel.declare_queue(queue_name)
        try:
            killed = run(["relay", dsn, url, queue_name], crash_at="relay:after_publish")
            assert killed == -signal.SIGKILL
            assert run(["relay", dsn, url, queue_name]) == 0
            received: list[str] = []
            acted: list[bool] = []
            async with queue.iterator() as messages:
                async for message in messages:
                    async with message.process():
                        assert message.message_id is not None
                        received.append(message.message_id)
                        acted.append(consume(dsn, message.message_id, message.body))
                    if len(received) == 8:
                        break
        finally:
            await queue.delete(if_unused=False, if_empty=False)
    assert received == ids + ids  # published, killed before marking, published again
    assert acted == [True] * 4 + [False] * 4  # the inbox drops the redeliveries
    assert work_done(dsn) == ids


def test_a_relay_frozen_mid_round_releases_its_keys_to_another_relay(dsn: str) -> None:
    """The relay's session turned idle_in_transaction_session_timeout off: a relay frozen
    as it published (a paused container, a VM stall, SIGSTOP here) held its keys' row
    locks for as long as it stayed frozen, and no other relay could publish them. Its
    session has a limit of its own now (four publish_timeouts; 0.5 s here: 2 s), so the
    server ends it and another relay takes the keys over, in order."""
    with psycopg.connect(dsn, autocommit=True) as conn, conn.transaction():
        ids = [emit_txn(conn, "test.event", {"n": n}, key="k") for n in range(5)]
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    frozen = subprocess.Popen([sys.executable, str(WORKER), "frozen-relay", dsn], env=env)
    try:
        _, status = os.waitpid(frozen.pid, os.WUNTRACED)  # returns once it has stopped
        assert os.WIFSTOPPED(status), status
        got = asyncio.run(publish_all(dsn, len(ids)))
    finally:
        frozen.kill()
        frozen.wait()
    assert got == ids
    with psycopg.connect(dsn) as conn:
        assert backlog(conn)["pending"] == 0


async def publish_all(dsn: str, count: int) -> list[str]:
    """Run a relay until it has published `count` events; their ids in publish order."""
    got: list[str] = []
    all_in = asyncio.Event()
    loop = asyncio.get_running_loop()

    def publish(event: OutboxEvent) -> None:
        got.append(event.event_id)
        if len(got) == count:
            loop.call_soon_threadsafe(all_in.set)

    relay = OutboxRelay(dsn, CallbackPublisher(publish), idle_wait=0.1)
    stop = asyncio.Event()
    running = asyncio.ensure_future(relay.run(stop))
    await all_in.wait()  # the frozen relay's locks are gone: its keys are published
    stop.set()
    await running
    return got
