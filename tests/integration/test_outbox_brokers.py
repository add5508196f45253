"""Publishers against the real brokers on this machine and a real HTTP receiver.

RabbitMQ (127.0.0.1:5672, guest/guest) with publisher confirms, NATS JetStream
(127.0.0.1:4222) with `Nats-Msg-Id`, and a local webhook receiver that checks the HMAC
signature. Consumers record each message id with `inbox_record_txn` in the transaction
of their own work, so a redelivered message does nothing twice. With CI=true a missing
broker fails the test; elsewhere it is skipped.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import gc
import logging
import os
import shutil
import socket
import subprocess
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import psycopg
import pytest
from outbox_receivers import (
    WebhookReceiver,
    consume,
    need_broker,
    standard_webhooks_verify,
    work_done,
)

from langgraph_durable import DurablePostgresSaver
from langgraph_durable.outbox import (
    OutboxEvent,
    OutboxRelay,
    backlog,
    emit_txn,
    is_transport_error,
)
from langgraph_durable.outbox.publishers import NatsPublisher, RabbitMQPublisher, WebhookPublisher

RABBIT_URL = "amqp://guest:guest@127.0.0.1:5672/"
NATS_URL = "nats://127.0.0.1:4222"


@pytest.fixture
def dsn(fresh_db_dsn: str) -> str:
    with DurablePostgresSaver.from_conn_string(fresh_db_dsn) as saver:
        saver.setup()
    with psycopg.connect(fresh_db_dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE consumer_work (message_id TEXT, body JSONB)")
    return fresh_db_dsn


def emit_events(dsn: str, count: int, key: str = "k") -> list[str]:
    with psycopg.connect(dsn, autocommit=True) as conn, conn.transaction():
        return [emit_txn(conn, "test.event", {"n": n}, key=key) for n in range(count)]


async def drain(relay: OutboxRelay) -> None:
    while (await relay.run_once()).claimed:
        pass


async def test_rabbitmq_publishes_with_confirms_and_the_event_id(dsn: str) -> None:
    need_broker("RabbitMQ", 5672)
    import aio_pika

    queue_name = f"outbox-test-{uuid.uuid4()}"
    connection = await aio_pika.connect_robust(RABBIT_URL)
    async with connection:
        channel = await connection.channel()
        queue = await channel.declare_queue(queue_name, auto_delete=True)
        ids = emit_events(dsn, 5)
        publisher = RabbitMQPublisher(RABBIT_URL, routing_key=queue_name)
        relay = OutboxRelay(dsn, publisher)
        await drain(relay)
        # A relay that died before marking would publish again: same message ids.
        await publisher.publish(OutboxEvent(ids[0], "test.event", "k", {"n": 0}, seq=0))
        received: list[str] = []
        async with queue.iterator() as messages:
            async for message in messages:
                async with message.process():
                    assert message.type == "test.event"
                    assert message.message_id is not None
                    received.append(message.message_id)
                    consume(dsn, message.message_id, message.body)
                if len(received) == 6:
                    break
        await relay.aclose()
        await publisher.aclose()
    assert received == [*ids, ids[0]]
    assert work_done(dsn) == ids


async def test_rabbitmq_an_event_no_queue_takes_stays_pending_with_the_reason(dsn: str) -> None:
    """RabbitMQ returns a mandatory message no queue is bound for; aio-pika's default
    would let `publish` succeed and the relay mark a lost event published."""
    need_broker("RabbitMQ", 5672)
    import aio_pika

    routing_key = f"outbox-test-unbound-{uuid.uuid4()}"
    [event_id] = emit_events(dsn, 1)
    publisher = RabbitMQPublisher(RABBIT_URL, routing_key=routing_key)
    relay = OutboxRelay(dsn, publisher, backoff_base=0.0, backoff_cap=0.0)
    try:
        result = await relay.run_once()
        assert (result.published, result.failed) == (0, 1)
        with psycopg.connect(dsn) as conn:
            row = conn.execute(
                "SELECT status, attempts, last_error FROM langgraph_durable_outbox"
            ).fetchone()
        assert row is not None
        status, attempts, last_error = row
        assert (status, attempts) == ("pending", 1)
        assert last_error.startswith("UnroutableError: RabbitMQ returned event")
        assert "NO_ROUTE" in last_error
        assert f"no queue is bound to routing key {routing_key!r}" in last_error
        # Once a queue takes it, the same publisher delivers it.
        connection = await aio_pika.connect_robust(RABBIT_URL)
        async with connection:
            channel = await connection.channel()
            queue = await channel.declare_queue(routing_key, auto_delete=True)
            assert (await relay.run_once()).published == 1
            message = await queue.get(timeout=10)
            await message.ack()
            assert message.message_id == event_id
    finally:
        await relay.aclose()
        await publisher.aclose()


def closed_port() -> int:
    """A local port nothing listens on (bound once by the system, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


async def test_rabbitmq_an_outage_spends_no_attempts_and_keeps_the_order(
    dsn: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Connection refusals counted as failed attempts turned every waiting head dead
    after the backoff schedule (about 8.5 minutes at the defaults), and the events
    behind a dead head went out before it. Here the relay cannot connect for more
    rounds than `max_attempts`, then the broker is back: every event is published, in
    order per key, each on its first counted attempt, and the outage is logged once."""
    need_broker("RabbitMQ", 5672)
    import aio_pika

    queue_name = f"outbox-test-{uuid.uuid4()}"
    connection = await aio_pika.connect_robust(RABBIT_URL)
    async with connection:
        channel = await connection.channel()
        queue = await channel.declare_queue(queue_name, auto_delete=True)
        with psycopg.connect(dsn, autocommit=True) as conn:
            ids = [emit_txn(conn, "acct.changed", {"n": n}, key=f"acct-{n % 2}") for n in range(6)]
        down = f"amqp://guest:guest@127.0.0.1:{closed_port()}/"
        publisher = RabbitMQPublisher(down, routing_key=queue_name)
        relay = OutboxRelay(dsn, publisher, max_attempts=2, backoff_base=1.0, backoff_cap=8.0)
        caplog.set_level(logging.DEBUG, logger="langgraph_durable")
        try:
            for round_number in range(5):
                result = await relay.run_once()
                # After the first, each round tries one key; it fails, the other waits.
                tried = 2 if round_number == 0 else 1
                assert (result.published, result.failed, result.unreachable) == (0, tried, tried)
                assert result.dead == 0
            assert relay._outage_pause() == 8.0  # 1, 2, 4, 8, then the cap
            with psycopg.connect(dsn) as conn:
                rows = conn.execute(
                    "SELECT status, attempts, last_error FROM langgraph_durable_outbox ORDER BY seq"
                ).fetchall()
            assert [row[:2] for row in rows] == [("pending", 0)] * 6
            assert all("Connect call failed" in row[2] for row in rows[:2])
            publisher.url = RABBIT_URL  # the broker is back
            await drain(relay)
            assert relay._outage_pause() == 0.0
        finally:
            await relay.aclose()
            await publisher.aclose()
        received: list[str] = []
        while len(received) < 6:
            message = await queue.get(timeout=10)
            await message.ack()
            assert message.message_id is not None
            received.append(message.message_id)
    for key in (0, 1):
        assert [i for i in received if ids.index(i) % 2 == key] == ids[key::2]
    with psycopg.connect(dsn) as conn:
        stored = conn.execute(
            "SELECT status, attempts, last_error FROM langgraph_durable_outbox"
        ).fetchall()
    assert stored == [("published", 1, None)] * 6
    warnings = [
        r.getMessage()
        for r in caplog.records
        if r.name.startswith("langgraph_durable") and r.levelno >= logging.WARNING
    ]
    assert len(warnings) == 2, warnings
    assert warnings[0].startswith("outbox relay cannot reach the broker (")
    assert warnings[1] == "outbox relay reaches the broker again, after 5 round(s) that could not"


@contextlib.asynccontextmanager
async def silent_broker() -> AsyncIterator[int]:
    """A port that accepts connections and never answers: a hung broker, or a firewall
    that lets the handshake through and drops the rest."""
    held: list[asyncio.StreamWriter] = []

    async def hold(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        held.append(writer)

    server = await asyncio.start_server(hold, "127.0.0.1", 0)
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        for writer in held:
            writer.close()
        server.close()


@pytest.mark.parametrize("broker", ["rabbitmq", "nats", "nats_refused"])
async def test_a_broker_that_does_not_answer_is_an_outage_that_spends_no_attempt(
    dsn: str, broker: str
) -> None:
    """A silent broker made the connect wait for the relay's publish_timeout, which counts
    against the event; nats-py also retried a refused server for about two minutes. Each
    is an outage now (the connect's own timeout): no attempt spent, nothing left
    reconnecting in the background."""
    (event_id,) = emit_events(dsn, 1)
    gc.collect()  # what earlier tests dropped is not this test's
    gc.disable()  # keep what the failed connect dropped where the check below can see it
    try:
        async with silent_broker() as port:
            result = await relay_once_against(dsn, broker, port)
        left_open = [
            obj
            for obj in gc.get_objects()
            if type(obj).__name__ == "Connection"
            and type(obj).__module__.startswith("aio_pika")
            and not obj.is_closed
        ]
    finally:
        gc.enable()
    # aio-pika closes a dropped, unclosed connection from its __del__ by scheduling
    # close() on whatever loop is current when the collector runs; outside this loop the
    # coroutine was never awaited (an unraisable warning in some later test).
    assert left_open == []
    assert (result.published, result.failed, result.unreachable, result.dead) == (0, 1, 1, 0)

    with psycopg.connect(dsn) as conn:
        row = conn.execute(
            "SELECT status, attempts, last_error FROM langgraph_durable_outbox WHERE event_id = %s",
            (event_id,),
        ).fetchone()
    assert row is not None
    assert row[:2] == ("pending", 0)
    assert "cannot connect to the broker" in row[2]


@pytest.mark.parametrize("broker", ["rabbitmq", "nats"])
async def test_an_outage_s_first_round_spends_no_attempt_of_any_key(dsn: str, broker: str) -> None:
    """Every key of a round publishes at once. The keys queued behind one connect lock,
    each connecting again after the previous connect had timed out, and those waits ran
    into the relay's publish_timeout: from the third key on, events failed with a blank
    TimeoutError counted against them (at the defaults, 4 of 6 events dead after one
    round with max_attempts=1). Those waiting share the one connect, and its failure."""
    for n in range(5):
        emit_events(dsn, 1, key=f"k{n}")
    async with silent_broker() as port:
        if broker == "rabbitmq":
            publisher: Any = RabbitMQPublisher(
                f"amqp://guest:guest@127.0.0.1:{port}/", routing_key="q", connect_timeout=1
            )
        else:
            publisher = NatsPublisher(f"nats://127.0.0.1:{port}", connect_timeout=1)
        relay = OutboxRelay(dsn, publisher, publish_timeout=2.5, max_attempts=1)
        try:
            result = await relay.run_once()
        finally:
            await relay.aclose()
            await publisher.aclose()
    assert (result.published, result.failed, result.unreachable, result.dead) == (0, 5, 5, 0)
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT status, attempts, last_error FROM langgraph_durable_outbox ORDER BY seq"
        ).fetchall()
    assert [row[:2] for row in rows] == [("pending", 0)] * 5
    assert all("no answer within 1 s" in row[2] for row in rows)


async def relay_once_against(dsn: str, broker: str, port: int) -> Any:
    """One relay pass against the silent broker on `port` (or, for "nats_refused", a
    closed port), checking that nothing is left running in the background."""
    if broker == "rabbitmq":
        publisher: Any = RabbitMQPublisher(
            f"amqp://guest:guest@127.0.0.1:{port}/", routing_key="q", connect_timeout=1
        )
    else:
        target = port if broker == "nats" else closed_port()
        publisher = NatsPublisher(f"nats://127.0.0.1:{target}", connect_timeout=1)
    before = asyncio.all_tasks()
    relay = OutboxRelay(dsn, publisher, max_attempts=1)  # publish_timeout: 30 s
    try:
        result = await relay.run_once()
    finally:
        await relay.aclose()
        await publisher.aclose()
    assert asyncio.all_tasks() - before - {asyncio.current_task()} == set()
    return result


async def test_rabbitmq_opens_a_channel_again_after_the_broker_closed_it() -> None:
    """The broker closes a channel on some errors (here: the exchange was deleted under
    it) and leaves the connection open; every later publish failed on the closed channel,
    read as an outage, and the relay backed off for good."""
    need_broker("RabbitMQ", 5672)
    import aio_pika

    exchange, queue = f"outbox-ex-{uuid.uuid4()}", f"outbox-q-{uuid.uuid4()}"
    admin = await aio_pika.connect(RABBIT_URL)
    async with admin:
        channel = await admin.channel()

        async def declare() -> None:
            declared = await channel.declare_exchange(exchange, "fanout")
            await (await channel.declare_queue(queue, auto_delete=True)).bind(declared)

        await declare()
        publisher = RabbitMQPublisher(RABBIT_URL, exchange=exchange, routing_key="any")

        def event(n: int) -> OutboxEvent:
            return OutboxEvent(
                event_id=str(uuid.uuid4()), event_type="t", key="k", payload={"n": n}, seq=n
            )

        try:
            await publisher.publish(event(1))
            await channel.exchange_delete(exchange)
            with pytest.raises(aio_pika.exceptions.ChannelNotFoundEntity) as failed:
                await publisher.publish(event(2))  # the broker closes the channel
            assert not is_transport_error(failed.value)
            await declare()
            await publisher.publish(event(3))  # on a channel opened again
        finally:
            await publisher.aclose()
            await channel.exchange_delete(exchange)


async def test_nats_jetstream_dedupes_by_msg_id(dsn: str) -> None:
    need_broker("NATS", 4222)
    import nats

    name = f"outbox_{uuid.uuid4().hex}"
    subject = f"outbox.{name}"
    client = await nats.connect(NATS_URL)
    js = client.jetstream()
    await js.add_stream(name=name, subjects=[subject])
    try:
        ids = emit_events(dsn, 4)
        publisher = NatsPublisher(NATS_URL, subject=subject)
        relay = OutboxRelay(dsn, publisher)
        await drain(relay)
        # The same event again (a relay killed before marking it): the stream drops it.
        await publisher.publish(OutboxEvent(ids[0], "test.event", "k", {"n": 0}, seq=0))
        info = await js.stream_info(name)
        assert info.state.messages == 4
        sub = await js.pull_subscribe(subject, durable=f"c{uuid.uuid4().hex}", stream=name)
        received: list[str] = []
        while len(received) < 4:
            for message in await sub.fetch(4 - len(received)):
                assert message.headers is not None
                message_id = message.headers["Nats-Msg-Id"]
                consume(dsn, message_id, message.data)
                received.append(message_id)
                await message.ack()
        await relay.aclose()
        await publisher.aclose()
    finally:
        await js.delete_stream(name)
        await client.close()
    assert received == ids
    assert work_done(dsn) == ids


ODD_HEADERS = [
    ("order.created", "line1\nline2"),
    ("order.created", "x\r\nNats-Msg-Id: 00000000-0000-0000-0000-000000000000"),
    ("order\r\ncreated", "  padded  "),
    ("commande.expédiée", "commande-été"),
    ("t", "50%"),
]
"""Event types and keys that header values do not carry as they are everywhere."""


async def test_nats_headers_carry_any_key_and_type_percent_encoded(dsn: str) -> None:
    """nats-py trims a header value and turns CR and LF into spaces: a key holding a line
    break reached consumers changed. The type and key headers are percent-encoded UTF-8
    now, as a webhook's are; `urllib.parse.unquote` gives the text back. Every message
    says so (`event-headers-encoding: percent`): consumers could not tell an encoded value
    from one an older relay sent as it was."""
    need_broker("NATS", 4222)
    import nats

    name = f"outbox_{uuid.uuid4().hex}"
    subject = f"outbox.{name}"
    client = await nats.connect(NATS_URL)
    js = client.jetstream()
    await js.add_stream(name=name, subjects=[subject])
    try:
        with psycopg.connect(dsn, autocommit=True) as conn:
            ids = [emit_txn(conn, event_type, {}, key=key) for event_type, key in ODD_HEADERS]
        publisher = NatsPublisher(NATS_URL, subject=subject)
        relay = OutboxRelay(dsn, publisher, max_attempts=1)
        try:
            await drain(relay)
        finally:
            await relay.aclose()
            await publisher.aclose()
        sub = await js.pull_subscribe(subject, durable=f"c{uuid.uuid4().hex}", stream=name)
        got: dict[str, tuple[str, str]] = {}
        while len(got) < len(ids):
            for message in await sub.fetch(len(ids) - len(got)):
                headers = message.headers or {}
                assert headers["event-id"] == headers["Nats-Msg-Id"]
                assert headers["event-headers-encoding"] == "percent"
                got[headers["Nats-Msg-Id"]] = (
                    unquote(headers["event-type"]),
                    unquote(headers["event-key"]),
                )
                await message.ack()
    finally:
        await js.delete_stream(name)
        await client.close()
    assert got == dict(zip(ids, ODD_HEADERS, strict=True))


async def test_rabbitmq_headers_carry_any_key_and_type_as_they_are(dsn: str) -> None:
    """AMQP header values are length-prefixed: line breaks, spaces and any UTF-8 arrive
    as sent, so the RabbitMQ publisher does not percent-encode them (README "Headers")."""
    need_broker("RabbitMQ", 5672)
    import aio_pika

    queue_name = f"outbox-test-{uuid.uuid4()}"
    connection = await aio_pika.connect_robust(RABBIT_URL)
    async with connection:
        channel = await connection.channel()
        queue = await channel.declare_queue(queue_name, auto_delete=True)
        with psycopg.connect(dsn, autocommit=True) as conn:
            ids = [emit_txn(conn, event_type, {}, key=key) for event_type, key in ODD_HEADERS]
        publisher = RabbitMQPublisher(RABBIT_URL, routing_key=queue_name)
        relay = OutboxRelay(dsn, publisher, max_attempts=1)
        try:
            await drain(relay)
        finally:
            await relay.aclose()
            await publisher.aclose()
        got: dict[str, tuple[Any, Any]] = {}
        async with queue.iterator() as messages:
            async for message in messages:
                async with message.process():
                    assert message.message_id == message.headers["event-id"]
                    got[message.message_id] = (
                        message.headers["event-type"],
                        message.headers["event-key"],
                    )
                if len(got) == len(ids):
                    break
    assert got == dict(zip(ids, ODD_HEADERS, strict=True))


@contextlib.contextmanager
def nats_server(port: int, store: Path) -> Iterator[subprocess.Popen[bytes]]:
    """A NATS server with JetStream of its own on `port`, stopped at the end."""
    server = subprocess.Popen(
        ["nats-server", "-js", "-sd", str(store), "-a", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        yield server
    finally:
        server.terminate()
        server.wait()


async def connected_to_nats(port: int) -> Any:
    """A client of the server on `port`, once the server takes connections."""
    import nats

    while True:
        try:
            return await nats.connect(f"nats://127.0.0.1:{port}", allow_reconnect=False)
        except Exception:  # not listening yet
            await asyncio.sleep(0.05)


async def test_nats_a_server_restart_spends_no_attempt(dsn: str, tmp_path: Path) -> None:
    """nats-py reconnected by itself: a publish during its reconnect was buffered and
    failed with "nats: timeout", counted against the event (two attempts spent in a
    20-second outage). The publisher reconnects itself now: its client closes with the
    server, and a publish meanwhile is refused as an outage."""
    if shutil.which("nats-server") is None:
        pytest.skip("nats-server is not installed")
    import nats

    port = closed_port()
    publisher = NatsPublisher(f"nats://127.0.0.1:{port}", subject="orders.changed")
    disconnected = asyncio.Event()

    def connect(*args: Any, **kwargs: Any) -> Any:
        async def on_disconnect() -> None:
            disconnected.set()

        return nats.connect(*args, disconnected_cb=on_disconnect, **kwargs)

    publisher._nats = type("Nats", (), {"connect": staticmethod(connect)})()
    relay = OutboxRelay(dsn, publisher, max_attempts=1, backoff_base=0.0, backoff_cap=0.0)
    try:
        with nats_server(port, tmp_path / "js") as server:
            admin = await connected_to_nats(port)
            await admin.jetstream().add_stream(name="orders", subjects=["orders.>"])
            await admin.close()
            emit_events(dsn, 1, key="a")
            assert (await relay.run_once()).published == 1
            server.terminate()
            server.wait()
            await disconnected.wait()  # the client has seen it go
            [during] = emit_events(dsn, 1, key="b")
            result = await relay.run_once()
        assert (result.published, result.unreachable, result.dead) == (0, 1, 0)
        with nats_server(port, tmp_path / "js"):
            while (await relay.run_once()).unreachable:
                pass
            await connected_to_nats(port)  # up: the loop above ended on a published round
        with psycopg.connect(dsn) as conn:
            row = conn.execute(
                "SELECT status, attempts FROM langgraph_durable_outbox WHERE event_id = %s",
                (during,),
            ).fetchone()
        assert row == ("published", 1)
    finally:
        await relay.aclose()
        await publisher.aclose()


class CountingClient:
    """A broker client module whose `connect_name` calls (a connect function, a
    connection class) are counted: a publisher's connections, counted in-process (the
    publisher keeps its client module in an attribute, so a test can hand it this one)."""

    def __init__(self, module: Any, connect_name: str) -> None:
        self._module = module
        self.connects = 0
        connect = getattr(module, connect_name)

        def counted(*args: Any, **kwargs: Any) -> Any:
            self.connects += 1
            return connect(*args, **kwargs)

        self._connect = (connect_name, counted)

    def __getattr__(self, name: str) -> Any:
        return self._connect[1] if name == self._connect[0] else getattr(self._module, name)


async def test_rabbitmq_opens_one_connection_for_a_round_over_many_keys(dsn: str) -> None:
    """The relay publishes every key of a round at once; before the publisher guarded
    its connect with a lock, each key's first publish opened a connection of its own and
    all but one leaked."""
    need_broker("RabbitMQ", 5672)
    import aio_pika

    queue_name = f"outbox-test-{uuid.uuid4()}"
    connection = await aio_pika.connect_robust(RABBIT_URL)
    async with connection:
        channel = await connection.channel()
        queue = await channel.declare_queue(queue_name, auto_delete=True)
        for n in range(30):
            emit_events(dsn, 1, key=f"k{n}")
        publisher = RabbitMQPublisher(RABBIT_URL, routing_key=queue_name)
        client = CountingClient(aio_pika, "Connection")
        publisher._aio_pika = client
        relay = OutboxRelay(dsn, publisher, keys=100)
        try:
            assert (await relay.run_once()).published == 30
            assert (await queue.declare()).message_count == 30
        finally:
            await relay.aclose()
            await publisher.aclose()
    assert client.connects == 1


async def test_nats_opens_one_connection_for_a_round_over_many_keys(dsn: str) -> None:
    need_broker("NATS", 4222)
    import nats

    name = f"outbox_{uuid.uuid4().hex}"
    subject = f"outbox.{name}"
    admin = await nats.connect(NATS_URL)
    js = admin.jetstream()
    await js.add_stream(name=name, subjects=[subject])
    try:
        for n in range(30):
            emit_events(dsn, 1, key=f"k{n}")
        publisher = NatsPublisher(NATS_URL, subject=subject)
        client = CountingClient(nats, "connect")
        publisher._nats = client
        relay = OutboxRelay(dsn, publisher, keys=100)
        try:
            assert (await relay.run_once()).published == 30
        finally:
            await relay.aclose()
            await publisher.aclose()
        assert (await js.stream_info(name)).state.messages == 30
    finally:
        await js.delete_stream(name)
        await admin.close()
    assert client.connects == 1


@pytest.fixture
def receiver(dsn: str) -> Iterator[WebhookReceiver]:
    found = WebhookReceiver(dsn, b"s3cret")
    yield found
    found.close()


async def test_webhooks_are_signed_and_redeliveries_do_nothing_twice(
    dsn: str, receiver: WebhookReceiver
) -> None:
    ids = emit_events(dsn, 3)
    publisher = WebhookPublisher(receiver.url, b"s3cret")
    relay = OutboxRelay(dsn, publisher)
    await drain(relay)
    await publisher.publish(OutboxEvent(ids[1], "test.event", "k", {"n": 1}, seq=0))
    assert receiver.deliveries == [*ids, ids[1]]
    assert work_done(dsn) == ids
    # A wrong secret is refused, and the relay counts it as a failed publish.
    forger = WebhookPublisher(receiver.url, b"wrong")
    with pytest.raises(Exception, match="401"):
        await forger.publish(OutboxEvent(ids[0], "test.event", "k", {}, seq=0))
    assert receiver.rejected == 1
    await relay.aclose()
    await publisher.aclose()
    await forger.aclose()


async def test_a_webhook_carries_any_key_and_type_percent_encoded(
    dsn: str, receiver: WebhookReceiver
) -> None:
    """httpx sends header values as ASCII: an event whose key (the thread id, by default)
    or type held any other character failed every attempt and went dead. The headers are
    percent-encoded UTF-8 now; `urllib.parse.unquote` gives the text back."""
    sent = [("order.shipped", "commande-été"), ("commande.expédiée", "order 3"), ("t", "50%")]
    with psycopg.connect(dsn, autocommit=True) as conn:
        ids = [emit_txn(conn, event_type, {}, key=key) for event_type, key in sent]
    publisher = WebhookPublisher(receiver.url, b"s3cret")
    relay = OutboxRelay(dsn, publisher, max_attempts=1)
    try:
        await drain(relay)
    finally:
        await relay.aclose()
        await publisher.aclose()
    got = {
        h["webhook-id"]: (unquote(h["event-type"]), unquote(h["event-key"]))
        for h in receiver.headers
    }
    assert got == dict(zip(ids, sent, strict=True))


async def test_a_standard_webhooks_receiver_accepts_what_the_relay_sends(dsn: str) -> None:
    """The receiver checks each delivery with an implementation of the Standard Webhooks
    specification written in the tests, not with the package's `verify_webhook`."""
    secret = "whsec_" + base64.b64encode(os.urandom(24)).decode()
    receiver = WebhookReceiver(
        dsn,
        secret,
        verify=lambda key, headers, body: standard_webhooks_verify(
            key, headers, body, now=time.time()
        ),
    )
    ids = emit_events(dsn, 3)
    publisher = WebhookPublisher(receiver.url, secret)
    relay = OutboxRelay(dsn, publisher)
    try:
        await drain(relay)
    finally:
        await relay.aclose()
        await publisher.aclose()
        receiver.close()
    assert receiver.deliveries == ids
    assert receiver.rejected == 0
    assert work_done(dsn) == ids


async def test_a_failed_publish_never_shows_the_url_password(
    dsn: str, receiver: WebhookReceiver, caplog: pytest.LogCaptureFixture
) -> None:
    """httpx quotes the URL it failed on; the relay stores and logs it without the
    credentials (the outbox row's last error is shown by `outbox dead`)."""
    emit_events(dsn, 1)
    url = receiver.url.replace("://", "://hook-user:pw-not-shown@", 1)
    publisher = WebhookPublisher(url, b"wrong")  # refused: 401
    relay = OutboxRelay(dsn, publisher, max_attempts=1)
    caplog.set_level(logging.WARNING, logger="langgraph_durable")
    try:
        assert (await relay.run_once()).failed == 1
    finally:
        await relay.aclose()
        await publisher.aclose()
    with psycopg.connect(dsn) as conn:
        row = conn.execute("SELECT status, last_error FROM langgraph_durable_outbox").fetchone()
    assert row is not None
    status, last_error = row
    assert status == "dead"
    assert "401" in last_error
    assert "://***@127.0.0.1" in last_error
    logged = "\n".join(record.getMessage() for record in caplog.records)
    assert "401" in logged
    for text in (last_error, logged):
        assert "pw-not-shown" not in text
        assert "hook-user" not in text


async def test_a_receiver_that_hangs_up_on_one_event_holds_back_no_other_key(
    dsn: str,
) -> None:
    """httpx's `RemoteProtocolError` after the receiver read the request counted as an
    outage: the event spent no attempts, the relay went into outage mode and tried only
    that event's key, round after round, forever. It is a failure of the event now: the
    other keys' events go out, and the event is dead after `max_attempts`."""
    receiver = WebhookReceiver(dsn, b"s3cret", hang_up_on=lambda body: b"poison" in body)
    with psycopg.connect(dsn, autocommit=True) as conn:
        bad = emit_txn(conn, "t", {"poison": True}, key="bad")
    publisher = WebhookPublisher(receiver.url, b"s3cret")
    relay = OutboxRelay(dsn, publisher, max_attempts=3, backoff_base=0.0, backoff_cap=0.0)
    good: list[str] = []
    try:
        for n in range(6):  # each round, one more event of another key
            with psycopg.connect(dsn, autocommit=True) as conn:
                good.append(emit_txn(conn, "t", {"n": n}, key=f"good-{n}"))
            result = await relay.run_once()
            assert result.unreachable == 0
    finally:
        await relay.aclose()
        await publisher.aclose()
        receiver.close()
    assert receiver.deliveries == good
    assert receiver.hung_up == 3
    with psycopg.connect(dsn) as conn:
        row = conn.execute(
            "SELECT status, attempts, last_error FROM langgraph_durable_outbox WHERE event_id = %s",
            (bad,),
        ).fetchone()
    assert row is not None
    assert row[:2] == ("dead", 3)
    assert "RemoteProtocolError" in row[2]


async def test_an_unreachable_receiver_grows_the_backlog_which_then_drains_in_order(
    dsn: str,
) -> None:
    down = WebhookReceiver(dsn, b"s3cret")
    port = down.server.server_address[1]
    url = down.url
    down.close()  # nothing listens now: every publish is refused
    with psycopg.connect(dsn, autocommit=True) as conn:
        first = [emit_txn(conn, "t", {"n": n}, key=f"k{n % 2}") for n in range(6)]
    publisher = WebhookPublisher(url, b"s3cret")
    relay = OutboxRelay(dsn, publisher, max_attempts=1, backoff_base=0.0, backoff_cap=0.0)
    for round_number in range(3):
        result = await relay.run_once()
        # One head per key, refused (then, the broker known down, one key per round); a
        # refused connection (httpx.ConnectError) is no failure of the event: with
        # max_attempts=1 none goes dead.
        tried = 2 if round_number == 0 else 1
        assert (result.published, result.failed, result.unreachable) == (0, tried, tried)
        assert result.dead == 0
    with psycopg.connect(dsn, autocommit=True) as conn:
        later = [emit_txn(conn, "t", {"n": n}, key=f"k{n % 2}") for n in range(6, 10)]
        assert backlog(conn)["pending"] == 10
    up = WebhookReceiver(dsn, b"s3cret", port=port)
    try:
        await drain(relay)
        with psycopg.connect(dsn) as conn:
            assert backlog(conn)["pending"] == 0
    finally:
        up.close()
        await relay.aclose()
        await publisher.aclose()
    ids = first + later
    for key in ("k0", "k1"):
        in_key = [i for n, i in enumerate(ids) if n % 2 == int(key[1])]
        assert [i for i in up.deliveries if i in in_key] == in_key
    assert sorted(work_done(dsn)) == sorted(ids)
