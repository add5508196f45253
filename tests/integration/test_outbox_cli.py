"""`langgraph-durable outbox ...`: relay as its own process, backlog, dead, replay, prune."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from outbox_receivers import WebhookReceiver, need_broker
from psycopg.conninfo import make_conninfo

from langgraph_durable import (
    DurablePostgresSaver,
    InvalidInputError,
    OutboxRelayError,
    WrongArgumentTypeError,
)
from langgraph_durable.cli import main
from langgraph_durable.outbox import (
    OutboxRelay,
    emit_txn,
    prune_published,
    replay_dead,
    run_relay,
)
from langgraph_durable.outbox.publishers import CallbackPublisher

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def dsn(fresh_db_dsn: str) -> str:
    with DurablePostgresSaver.from_conn_string(fresh_db_dsn) as saver:
        saver.setup()
    with psycopg.connect(fresh_db_dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE consumer_work (message_id TEXT, body JSONB)")
    return fresh_db_dsn


@pytest.fixture
def receiver(dsn: str) -> Iterator[WebhookReceiver]:
    found = WebhookReceiver(dsn, b"cli-secret")
    yield found
    found.close()


def cli_json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, object]:
    assert main(["--json", *argv]) == 0
    result: dict[str, object] = json.loads(capsys.readouterr().out)
    return result


def test_the_relay_runs_as_a_cli_process(dsn: str, receiver: WebhookReceiver) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn, conn.transaction():
        ids = [emit_txn(conn, "cli.event", {"n": n}, key="k") for n in range(3)]
    env = {**os.environ, "LANGGRAPH_DURABLE_WEBHOOK_SECRET": "cli-secret"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    relay = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "langgraph_durable.cli",
            "--dsn",
            dsn,
            "outbox",
            "relay",
            receiver.url,
        ],
        env=env,
    )
    try:
        assert receiver.wait_for(3) == ids
        # Later events wake the running relay through NOTIFY.
        with psycopg.connect(dsn, autocommit=True) as conn:
            late = emit_txn(conn, "cli.event", {"n": 3}, key="k")
        assert receiver.wait_for(4)[-1] == late
    finally:
        relay.send_signal(signal.SIGINT)
        assert relay.wait() == 0


async def test_backlog_dead_replay_and_prune(dsn: str, capsys: pytest.CaptureFixture[str]) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        event_id = emit_txn(conn, "cli.poison", {}, key="p")
    assert cli_json(capsys, "--dsn", dsn, "outbox", "backlog")["pending"] == 1

    def refuse(event: object) -> None:
        raise RuntimeError("no route")

    relay = OutboxRelay(dsn, CallbackPublisher(refuse), max_attempts=1)
    assert (await relay.run_once()).dead == 1
    dead = cli_json(capsys, "--dsn", dsn, "outbox", "dead")["dead"]
    assert isinstance(dead, list)
    assert dead[0]["event_id"] == event_id
    assert "no route" in dead[0]["last_error"]
    assert cli_json(capsys, "--dsn", dsn, "outbox", "replay", event_id) == {"replayed": 1}
    relay.publisher = CallbackPublisher(lambda event: None)
    assert (await relay.run_once()).published == 1
    await relay.aclose()
    assert cli_json(capsys, "--dsn", dsn, "outbox", "prune", "--older-than", "1d") == {"pruned": 0}
    assert cli_json(capsys, "--dsn", dsn, "outbox", "backlog")["pending"] == 0


def test_a_retention_age_beyond_a_thousand_years_is_named(
    dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--dsn", dsn, "outbox", "prune", "--older-than", "60000w"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: older_than="), err
    assert "1,000 years" in err
    with psycopg.connect(dsn, autocommit=True) as conn:
        for bad in (float("nan"), -1, "1d"):
            with pytest.raises(InvalidInputError, match="older_than"):
                prune_published(conn, bad)  # type: ignore[arg-type]


def test_replaying_an_id_that_is_no_event_id_is_named(
    dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--dsn", dsn, "outbox", "replay", "not-an-event-id"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: event_id 'not-an-event-id': give an event id"), err


def test_replay_dead_given_one_id_instead_of_a_list_says_so(dsn: str) -> None:
    """A string was read character by character and refused as its first character."""
    event_id = str(uuid.uuid4())
    with psycopg.connect(dsn, autocommit=True) as conn:
        for one in (event_id, uuid.UUID(event_id)):
            with pytest.raises(WrongArgumentTypeError, match="give a list of event ids"):
                replay_dead(conn, one)  # type: ignore[arg-type]
        assert replay_dead(conn, [event_id]) == 0  # a list of it: not dead, nothing moved


def test_a_webhook_relay_without_a_secret_says_what_to_set(
    dsn: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("LANGGRAPH_DURABLE_WEBHOOK_SECRET", raising=False)
    assert main(["--dsn", dsn, "outbox", "relay", "https://example.invalid/hook"]) == 1
    assert "LANGGRAPH_DURABLE_WEBHOOK_SECRET" in capsys.readouterr().err


def test_a_relay_stopped_by_the_database_says_why_and_what_to_do(
    dsn: str,
    receiver: WebhookReceiver,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A database error that waiting will not cure (here a read-only session, as on a
    replica) ended `outbox relay` with a raw psycopg traceback; it is a named error now,
    printed as one line."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        emit_txn(conn, "cli.event", {}, key="k")
    monkeypatch.setenv("LANGGRAPH_DURABLE_WEBHOOK_SECRET", "cli-secret")
    read_only = make_conninfo(dsn, options="-c default_transaction_read_only=on")
    assert main(["--dsn", read_only, "outbox", "relay", receiver.url]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: The outbox relay stopped on a database error: "), err
    assert "read-only transaction (SQLSTATE 25006)" in err
    assert "stay pending" in err
    assert "start the relay again" in err
    with pytest.raises(OutboxRelayError, match="read-only"):
        run_relay(OutboxRelay(read_only, CallbackPublisher(lambda event: None)))
    assert receiver.deliveries == []


LOSES_THE_CANCELLATION = """
import asyncio, os, signal, sys
from langgraph_durable.outbox import OutboxRelay, run_relay

class AnsweredAsCtrlCArrives:
    interrupted = False

    async def publish(self, event):
        if not self.interrupted:
            self.interrupted = True
            os.kill(os.getpid(), signal.SIGINT)
        print("published", flush=True)

class LosesOneCancellation(OutboxRelay):
    # As a call does that returns its result instead of the cancellation (asyncio.wait_for
    # on Python 3.11 when the result is in just as the task is cancelled).
    lost = False

    async def run_once(self):
        try:
            return await super().run_once()
        except asyncio.CancelledError:
            if self.lost:
                raise
            self.lost = True
            uncancel = getattr(asyncio.current_task(), "uncancel", None)
            if uncancel is not None:
                uncancel()
            print("lost the cancellation", flush=True)
            return await super().run_once()

run_relay(LosesOneCancellation(sys.argv[1], AnsweredAsCtrlCArrives(), idle_wait=3600))
print("stopped", flush=True)
"""


def test_ctrl_c_stops_the_relay_even_when_the_cancellation_is_lost(dsn: str) -> None:
    """Ctrl-C stops the relay even when a call loses the cancellation it brought: a relay
    that went on running would wait here for an hour (the test's timeout ends it first)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        emit_txn(conn, "cli.event", {"n": 1}, key="k")
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    relay = subprocess.run(
        [sys.executable, "-c", LOSES_THE_CANCELLATION, dsn],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert relay.returncode == 0, relay.stderr
    # The round the cancellation cut short is rolled back: the event goes again (at least
    # once), then the relay stops.
    expected = ["published", "lost the cancellation", "published", "stopped"]
    assert relay.stdout.splitlines() == expected, relay.stdout


CLOSES_ITS_PUBLISHER = """
import signal, sys
from langgraph_durable import embedded
from langgraph_durable.outbox import OutboxRelay, run_relay

if sys.argv[2:] == ["embedded"]:  # a demo's embedded Postgres installed its handler
    signal.signal(signal.SIGTERM, embedded._on_sigterm)

class Publisher:
    async def publish(self, event):
        print("published", flush=True)

    async def aclose(self):
        print("closed", flush=True)

run_relay(OutboxRelay(sys.argv[1], Publisher(), idle_wait=3600))
print("stopped", flush=True)
now = signal.getsignal(signal.SIGTERM)
print("embedded" if now is embedded._on_sigterm else "default" if now is signal.SIG_DFL else now)
"""


@pytest.mark.parametrize(
    ("signum", "handler"),
    [(signal.SIGINT, "default"), (signal.SIGTERM, "default"), (signal.SIGTERM, "embedded")],
)
def test_ctrl_c_closes_the_publisher_in_the_relay_s_own_loop(
    dsn: str, signum: int, handler: str
) -> None:
    """`run_relay` (what `outbox relay` runs) never closed its publisher: the event loop
    ended with the broker connection open, and the client's callbacks then failed on
    the closed loop, printed as the process exited. SIGTERM (`docker stop`) ended the
    process on the spot, mid-round."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        emit_txn(conn, "cli.event", {"n": 1}, key="k")
    relay = subprocess.Popen(
        [sys.executable, "-c", CLOSES_ITS_PUBLISHER, dsn, handler],
        env={
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
        },
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert relay.stdout is not None
    assert relay.stdout.readline() == "published\n"
    relay.send_signal(signum)
    out, err = relay.communicate()
    assert relay.returncode == 0, err
    # The SIGTERM handler it found is back (removing its own had left Python's default).
    assert out.splitlines() == ["closed", "stopped", handler]


async def test_the_cli_relay_on_rabbitmq_stops_cleanly_on_ctrl_c(dsn: str) -> None:
    """Stopped with Ctrl-C, `outbox relay amqp://...` left its connection open when the
    loop ended, and aio-pika's callbacks printed "Event loop is closed" tracebacks."""
    need_broker("RabbitMQ", 5672)
    import aio_pika

    url = "amqp://guest:guest@127.0.0.1:5672/"
    with psycopg.connect(dsn, autocommit=True) as conn:
        emit_txn(conn, "cli.event", {"n": 1}, key="k")
    queue_name = f"outbox-cli-{uuid.uuid4()}"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    command = ["-m", "langgraph_durable.cli", "--dsn", dsn, "outbox", "relay", url]
    async with await aio_pika.connect(url) as connection:
        queue = await (await connection.channel()).declare_queue(queue_name, auto_delete=True)
        relay = await asyncio.create_subprocess_exec(
            sys.executable,
            *command,
            "--target",
            queue_name,
            env=env,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        try:
            async with queue.iterator() as messages:
                async for message in messages:  # the relay has published the event
                    await message.ack()
                    break
        finally:
            relay.send_signal(signal.SIGINT)
            out, err = (text.decode() for text in await relay.communicate())
    assert relay.returncode == 0, err
    assert err == ""
    assert "stopped" in out
