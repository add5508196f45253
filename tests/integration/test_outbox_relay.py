"""The relay on a real database, publishing through an in-process callback.

Every committed event is published, in `seq` order per key, with its event id; a failing
publish is retried after a backoff and held back its key meanwhile; an event that keeps
failing goes dead, visible and replayable; two relays at once share the work and never
publish a key out of order; a relay wakes on NOTIFY; published events are pruned.
"""

from __future__ import annotations

import asyncio
import logging
import math
import socket
import threading
import uuid
from collections import defaultdict
from typing import Any

import psycopg
import pytest
from psycopg.conninfo import make_conninfo

from langgraph_durable import (
    ConfigurationError,
    DatabaseUnreachableError,
    DurablePostgresSaver,
    InvalidInputError,
    SchemaNotReadyError,
    grant_app_role,
)
from langgraph_durable.outbox import (
    OutboxEvent,
    OutboxRelay,
    RoundResult,
    aevents,
    backlog,
    emit_txn,
    events,
    prune_published,
    replay_dead,
)
from langgraph_durable.outbox.publishers import CallbackPublisher


@pytest.fixture
def dsn(fresh_db_dsn: str) -> str:
    with DurablePostgresSaver.from_conn_string(fresh_db_dsn) as saver:
        saver.setup()
    return fresh_db_dsn


def emit_many(dsn: str, keys: int, per_key: int) -> dict[str, list[str]]:
    """Events interleaved across keys, each in its own transaction; ids per key in order."""
    ids: dict[str, list[str]] = defaultdict(list)
    with psycopg.connect(dsn, autocommit=True) as conn:
        for n in range(per_key):
            for k in range(keys):
                key = f"key-{k}"
                with conn.transaction():
                    ids[key].append(emit_txn(conn, "test.event", {"n": n, "key": key}, key=key))
    return ids


def status_of(dsn: str) -> dict[str, int]:
    with psycopg.connect(dsn) as conn:
        b = backlog(conn)
    return {"pending": b["pending"], "dead": b["dead"]}


async def drain(relay: OutboxRelay) -> None:
    while (await relay.run_once()).claimed:
        pass


def closed_port() -> int:
    """A local port nothing listens on (bound once by the system, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


async def test_every_event_is_published_in_order_per_key(dsn: str) -> None:
    ids = emit_many(dsn, keys=5, per_key=20)
    seen: dict[str, list[str]] = defaultdict(list)
    relay = OutboxRelay(dsn, CallbackPublisher(lambda e: seen[e.key].append(e.event_id)), keys=3)
    await drain(relay)
    await relay.aclose()
    assert dict(seen) == dict(ids)
    assert status_of(dsn) == {"pending": 0, "dead": 0}
    with psycopg.connect(dsn) as conn:
        assert prune_published(conn, 0) == 100
        assert events(conn) == []


async def test_events_lists_pending_events_never_tried_and_replayed(dsn: str) -> None:
    """A pending event not tried yet (and a replayed one) is stored with next_attempt_at
    '-infinity', which psycopg cannot load: `events()` raised DataError "timestamp too
    small" whenever one was listed. It shows None: the relay may try it at once."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        doomed = emit_txn(conn, "t", {"n": 0}, key="doomed")

    def refuse(event: OutboxEvent) -> None:
        raise RuntimeError("broker says no")

    relay = OutboxRelay(dsn, CallbackPublisher(refuse), max_attempts=1)
    assert (await relay.run_once()).dead == 1
    await relay.aclose()
    with psycopg.connect(dsn, autocommit=True) as conn:
        assert replay_dead(conn) == 1
        fresh = emit_txn(conn, "t", {"n": 1}, key="fresh")
        listed = events(conn, status="pending")
        assert [(str(row[1]), row[8], row[9]) for row in listed] == [
            (fresh, 0, None),
            (doomed, 0, None),
        ]
        assert [str(row[1]) for row in events(conn)] == [fresh, doomed]
    async with await psycopg.AsyncConnection.connect(dsn) as aconn:
        assert [str(row[1]) for row in await aevents(aconn)] == [fresh, doomed]


async def test_consumers_receive_the_payload_as_jsonb_normalizes_it(dsn: str) -> None:
    """What README "Payloads" promises: keys in jsonb's order (shorter first), a whole
    float written with an exponent as an int, -0.0 as 0.0; 1.0, other floats, big ints,
    strings and list order as emitted."""
    sent = {
        "zeta": 1,
        "a": 2,
        "price": 1e20,
        "neg0": -0.0,
        "one": 1.0,
        "big": 2**70,
        "tiny": 1e-7,
        "list": ["z", "a", 0.1],
    }
    with psycopg.connect(dsn, autocommit=True) as conn:
        emit_txn(conn, "t", sent, key="k")
    got: list[OutboxEvent] = []
    relay = OutboxRelay(dsn, CallbackPublisher(got.append))
    await drain(relay)
    await relay.aclose()
    (event,) = got
    assert list(event.payload) == ["a", "big", "one", "list", "neg0", "tiny", "zeta", "price"]
    assert event.payload == sent  # equal by value...
    price, neg0, one = event.payload["price"], event.payload["neg0"], event.payload["one"]
    assert (type(price), price) == (int, 10**20)  # ...but 1e20 is an int now
    assert (type(neg0), math.copysign(1.0, neg0)) == (float, 1.0)  # and -0.0 is 0.0
    assert type(one) is float
    assert event.body() == (
        b'{"a":2,"big":1180591620717411303424,"one":1.0,"list":["z","a",0.1],'
        b'"neg0":0.0,"tiny":1e-07,"zeta":1,"price":100000000000000000000}'
    )


async def test_a_failing_event_holds_its_key_back_then_goes_dead_and_is_replayed(
    dsn: str,
) -> None:
    ids = emit_many(dsn, keys=2, per_key=3)
    poisoned = ids["key-0"][0]
    broken = True
    seen: list[str] = []

    def publish(event: OutboxEvent) -> None:
        if event.event_id == poisoned and broken:
            raise RuntimeError("broker says no")
        seen.append(event.event_id)

    relay = OutboxRelay(
        dsn, CallbackPublisher(publish), max_attempts=3, backoff_base=0.0, backoff_cap=0.0
    )
    first = await relay.run_once()
    assert (first.published, first.failed) == (3, 1)
    # key-0 waits behind its failing head; key-1 went through.
    assert seen == ids["key-1"]
    await drain(relay)
    with psycopg.connect(dsn) as conn:
        dead = events(conn, status="dead")
        assert [str(row[1]) for row in dead] == [poisoned]
        assert "broker says no" in dead[0][10]
    # A dead event no longer holds its key back.
    assert seen == ids["key-1"] + ids["key-0"][1:]
    broken = False
    with psycopg.connect(dsn) as conn:
        assert replay_dead(conn) == 1
    await drain(relay)
    await relay.aclose()
    assert seen[-1] == poisoned
    assert status_of(dsn) == {"pending": 0, "dead": 0}


async def test_an_os_error_of_one_event_holds_back_no_other_key(dsn: str) -> None:
    """Any `OSError` counted as the broker being unreachable: a callback failing on one
    event's payload (a full disk) kept it pending without spending attempts and, the
    relay in outage mode, only its key was tried again, forever."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        bad = emit_txn(conn, "t", {"poison": True}, key="bad")
    seen: list[str] = []

    def publish(event: OutboxEvent) -> None:
        if event.payload.get("poison"):
            raise OSError(28, "No space left on device")
        seen.append(event.event_id)

    relay = OutboxRelay(
        dsn, CallbackPublisher(publish), max_attempts=2, backoff_base=0.0, backoff_cap=0.0
    )
    good: list[str] = []
    for n in range(4):
        with psycopg.connect(dsn, autocommit=True) as conn:
            good.append(emit_txn(conn, "t", {"n": n}, key=f"good-{n}"))
        assert (await relay.run_once()).unreachable == 0
    await relay.aclose()
    assert seen == good
    with psycopg.connect(dsn) as conn:
        assert [str(row[1]) for row in events(conn, status="dead")] == [bad]


async def test_during_an_outage_the_probe_goes_round_the_keys(dsn: str) -> None:
    """While the broker cannot be reached the relay tries one key per round; it always
    tried the first, so one event refused as unreachable held every other key back."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        emit_txn(conn, "t", {"refused": True}, key="a-refused")
    seen: list[str] = []

    def publish(event: OutboxEvent) -> None:
        if event.payload.get("refused"):
            raise ConnectionRefusedError(111, "Connect call failed")
        seen.append(event.event_id)

    relay = OutboxRelay(
        dsn, CallbackPublisher(publish), max_attempts=1, backoff_base=0.0, backoff_cap=0.0
    )
    assert (await relay.run_once()).unreachable == 1  # the outage starts
    good: list[str] = []
    for n in range(3):
        with psycopg.connect(dsn, autocommit=True) as conn:
            good.append(emit_txn(conn, "t", {"n": n}, key=f"b-{n}"))
        result = await relay.run_once()
        # The key not refused yet goes first, gets through, and the refused one follows.
        assert (result.published, result.unreachable, result.dead) == (1, 1, 0)
    await relay.aclose()
    assert seen == good
    assert status_of(dsn) == {"pending": 1, "dead": 0}


async def test_a_failed_publish_waits_out_its_backoff(dsn: str) -> None:
    emit_many(dsn, keys=1, per_key=1)
    relay = OutboxRelay(
        dsn,
        CallbackPublisher(lambda e: (_ for _ in ()).throw(RuntimeError("refused"))),
        backoff_base=3600.0,
    )
    assert (await relay.run_once()).failed == 1
    # Not due for an hour: the next round claims nothing.
    assert (await relay.run_once()).claimed == 0
    assert await relay._seconds_to_next_due() is not None
    await relay.aclose()


async def test_two_relays_at_once_publish_each_event_once_in_order_per_key(dsn: str) -> None:
    ids = emit_many(dsn, keys=20, per_key=10)
    seen: dict[str, list[str]] = defaultdict(list)
    by_relay: dict[int, int] = defaultdict(int)

    def recorder(number: int) -> Any:
        async def publish(event: OutboxEvent) -> None:
            seen[event.key].append(event.event_id)
            by_relay[number] += 1
            await asyncio.sleep(0)  # let the other relay run between publishes

        return publish

    relays = [OutboxRelay(dsn, CallbackPublisher(recorder(n)), keys=4, batch=8) for n in range(2)]
    await asyncio.gather(*(drain(relay) for relay in relays))
    while status_of(dsn)["pending"]:
        await asyncio.gather(*(drain(relay) for relay in relays))
    for relay in relays:
        await relay.aclose()
    assert dict(seen) == dict(ids)
    assert sum(by_relay.values()) == 200
    assert all(by_relay[n] > 0 for n in range(2))


async def test_the_relay_wakes_on_notify(dsn: str) -> None:
    arrived = asyncio.Event()
    got: list[str] = []

    def publish(event: OutboxEvent) -> None:
        got.append(event.event_id)
        arrived.set()

    relay = OutboxRelay(dsn, CallbackPublisher(publish), idle_wait=3600.0)
    stop = asyncio.Event()
    running = asyncio.create_task(relay.run(stop))
    # The relay first finds nothing and waits (up to an hour) for a notification.
    while True:
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
            cur = await conn.execute(
                "SELECT count(*) FROM pg_stat_activity"
                " WHERE datname = current_database() AND query = 'LISTEN langgraph_durable_outbox'"
            )
            row = await cur.fetchone()
        if row and row[0]:
            break
        await asyncio.sleep(0.01)
    ids = emit_many(dsn, keys=1, per_key=1)
    await arrived.wait()
    stop.set()
    await running
    assert got == ids["key-0"]


@pytest.mark.timeout(60)
async def test_a_relay_stopped_while_idle_returns_without_waiting_out_idle_wait(
    dsn: str,
) -> None:
    """`run()` waited for a NOTIFY alone between rounds: stopped while idle, it returned
    only after `idle_wait`. Here the stop comes once the relay has decided to wait (it
    looked for the next backoff and found none) and is on its way into the wait; with an
    hour's `idle_wait` the test times out unless the wait also watches `stop`."""
    relay = OutboxRelay(dsn, CallbackPublisher(lambda event: None), idle_wait=3600.0)
    stop = asyncio.Event()
    looked = relay._seconds_to_next_due
    idle = asyncio.Event()

    async def then_stop() -> float | None:
        due = await looked()
        if not idle.is_set():
            idle.set()  # the relay is about to wait: stop it as soon as it yields
            asyncio.get_running_loop().call_soon(stop.set)
        return due

    relay._seconds_to_next_due = then_stop  # type: ignore[method-assign]
    await relay.run(stop)
    assert idle.is_set()
    assert relay._conn is None  # its session closed too


async def test_an_error_quoting_binary_data_is_stored_and_the_round_commits(dsn: str) -> None:
    """An error text with a NUL made the statement recording the failure raise: the
    round rolled back the marks of the events it had published, and they were
    published again every round."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        bad = emit_txn(conn, "t", {"n": 1}, key="a")
        good = emit_txn(conn, "t", {"n": 2}, key="b")
    published: list[str] = []

    def publish(event: OutboxEvent) -> None:
        if event.event_id == bad:
            raise RuntimeError(b"broker said \x00\x01 bad frame".decode("latin-1"))
        published.append(event.event_id)

    relay = OutboxRelay(dsn, CallbackPublisher(publish), backoff_base=3600.0, backoff_cap=3600.0)
    try:
        result = await relay.run_once()
        assert (result.published, result.failed) == (1, 1)
        assert (await relay.run_once()).claimed == 0
    finally:
        await relay.aclose()
    assert published == [good]
    assert stored(dsn) == {
        good: ("published", 1, None),
        bad: ("pending", 1, "RuntimeError: broker said \x01 bad frame"),
    }


def stored(dsn: str) -> dict[str, tuple[str, int, str | None]]:
    """Status, attempts and last error of every event, by event id."""
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT event_id::text, status, attempts, last_error FROM langgraph_durable_outbox"
        ).fetchall()
    return {row[0]: (row[1], row[2], row[3]) for row in rows}


async def test_a_mark_that_fails_undoes_no_other_event_s_mark(
    dsn: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A statement marking one key's events that fails (here a trigger refuses it) leaves
    those events pending; before, it rolled back the whole round and raised."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            """
            CREATE FUNCTION refuse_stuck() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN RAISE EXCEPTION 'refused by a trigger'; END $$;
            CREATE TRIGGER refuse_stuck BEFORE UPDATE ON langgraph_durable_outbox
            FOR EACH ROW WHEN (OLD.key LIKE 'stuck%') EXECUTE FUNCTION refuse_stuck();
            """
        )
        stuck_published = emit_txn(conn, "t", {}, key="stuck-1")
        stuck_failed = emit_txn(conn, "t", {}, key="stuck-2")
        ok = [emit_txn(conn, "t", {}, key=key) for key in ("a", "a", "b")]
        ok_failed = emit_txn(conn, "t", {}, key="c")

    def publish(event: OutboxEvent) -> None:
        if event.event_id in (stuck_failed, ok_failed):
            raise RuntimeError("receiver says no")

    relay = OutboxRelay(dsn, CallbackPublisher(publish))
    try:
        result = await relay.run_once()
    finally:
        await relay.aclose()
    assert (result.claimed, result.published, result.failed) == (6, 3, 2)
    assert stored(dsn) == {
        **{event_id: ("published", 1, None) for event_id in ok},
        ok_failed: ("pending", 1, "RuntimeError: receiver says no"),
        stuck_published: ("pending", 0, None),
        stuck_failed: ("pending", 0, None),
    }
    logged = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert len(logged) == 2
    assert stuck_published in logged[0]
    assert "refused by a trigger" in logged[0]
    assert stuck_failed in logged[1]


@pytest.mark.parametrize(
    ("set_before", "in_force"),
    [(None, 120_000), ("1500", 1500), ("1h", 120_000), ("0", 120_000)],
)
async def test_the_relay_s_session_has_a_finite_idle_limit_never_above_one_set_before(
    dsn: str, set_before: str | None, in_force: int, caplog: pytest.LogCaptureFixture
) -> None:
    """The relay turned `idle_in_transaction_session_timeout` off for its session: a relay
    frozen mid-round (SIGSTOP, a paused VM) held its keys' row locks for hours, even where
    the DBA had set a limit. Now its limit is four publish_timeouts (30 s: 120 s), and a
    lower one set for the server, the database, the role or in the DSN stays, with a
    warning that says what a round may need."""
    relay_dsn = (
        dsn
        if set_before is None
        else make_conninfo(dsn, options=f"-c idle_in_transaction_session_timeout={set_before}")
    )
    emit_many(dsn, keys=1, per_key=1)
    relay = OutboxRelay(relay_dsn, CallbackPublisher(lambda event: None))
    try:
        assert (await relay.run_once()).published == 1
        assert relay._conn is not None
        cur = await relay._conn.execute(
            "SELECT setting::int AS ms FROM pg_settings"
            " WHERE name = 'idle_in_transaction_session_timeout'"
        )
        row = await cur.fetchone()
    finally:
        await relay.aclose()
    assert row == {"ms": in_force}
    warned = [r.getMessage() for r in caplog.records if "idle_in_transaction" in r.getMessage()]
    if in_force < relay.idle_limit_ms:
        assert len(warned) == 1
        assert "is 1500 ms" in warned[0]
        assert "ALTER ROLE ... SET idle_in_transaction_session_timeout = '120s'" in warned[0]
    else:
        assert warned == []


async def test_a_round_starts_no_publish_after_one_publish_timeout(dsn: str) -> None:
    """What keeps a live round within its session's idle limit: a key's later events wait
    for the next round once a publish_timeout has passed (here each publish takes 60% of
    it, as a slow broker would), untouched: no attempt spent, no error."""
    ids = emit_many(dsn, keys=1, per_key=3)["key-0"]
    published: list[str] = []

    async def slow(event: OutboxEvent) -> None:
        await asyncio.sleep(0.3)  # a slow broker, not a wait for something
        published.append(event.event_id)

    relay = OutboxRelay(dsn, CallbackPublisher(slow), publish_timeout=0.5)
    try:
        first = await relay.run_once()
        assert (first.claimed, first.failed) == (3, 0)
        assert first.published < 3
        assert stored(dsn)[ids[2]] == ("pending", 0, None)
        await drain(relay)
    finally:
        await relay.aclose()
    assert published == ids


async def test_a_plain_function_that_outlasts_publish_timeout_fails_the_publish(
    dsn: str,
) -> None:
    """A plain function ran on the event loop, beyond the reach of publish_timeout: one
    that took long counted as published, and held the loop (and every key) meanwhile. It
    runs in a thread now; running out of time fails the publish, and the stored error
    says which limit ran out (it read "TimeoutError: ")."""
    [event_id] = emit_many(dsn, keys=1, per_key=1)["key-0"]
    release = threading.Event()

    def blocks(event: OutboxEvent) -> None:
        release.wait()  # until the test is done with the round

    relay = OutboxRelay(dsn, CallbackPublisher(blocks), publish_timeout=0.2)
    try:
        result = await relay.run_once()
    finally:
        release.set()
        await relay.aclose()
    assert (result.published, result.failed) == (0, 1)
    assert stored(dsn)[event_id] == (
        "pending",
        1,
        "TimeoutError: publish_timeout (0.2 s) exceeded",
    )


async def test_plain_functions_for_every_key_of_a_round_run_at_once(dsn: str) -> None:
    """On the loop's default executor (six threads on this machine) the calls for 30 keys
    queued for a thread, and their wait counted against publish_timeout: 18 events went
    dead, most of them never called. Each call here waits for all 30 to have started."""
    keys = 30
    emit_many(dsn, keys=keys, per_key=1)
    together = threading.Barrier(keys, timeout=60)

    def meets_the_others(event: OutboxEvent) -> None:
        together.wait()  # broken (an error) unless every key's call runs at once

    publisher = CallbackPublisher(meets_the_others)
    relay = OutboxRelay(dsn, publisher, keys=keys, publish_timeout=60, max_attempts=1)
    try:
        result = await relay.run_once()
    finally:
        together.abort()
        await relay.aclose()
        await publisher.aclose()
    assert (result.published, result.failed, result.dead) == (keys, 0, 0)


async def test_run_once_raises_named_errors_and_run_closes_its_session_when_it_stops(
    fresh_db_dsn: str,
) -> None:
    """`run_once()`, the README's way to drain, let raw psycopg errors through (before
    `setup()`: UndefinedTable; a server that cannot be reached: OperationalError), and
    `run()` stopping on an error left its connection open."""
    relay = OutboxRelay(fresh_db_dsn, CallbackPublisher(lambda event: None))
    with pytest.raises(SchemaNotReadyError, match="setup"):
        await relay.run_once()
    with pytest.raises(SchemaNotReadyError):
        await relay.run()
    assert relay._conn is None
    with psycopg.connect(fresh_db_dsn) as conn:
        sessions = conn.execute(
            "SELECT count(*) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
        ).fetchone()
    assert sessions == (0,)
    down = make_conninfo(fresh_db_dsn, host="127.0.0.1", port=closed_port(), password="pw-hidden")
    refused = OutboxRelay(down, CallbackPublisher(lambda event: None))
    with pytest.raises(DatabaseUnreachableError, match="Could not connect to Postgres") as raised:
        await refused.run_once()
    assert "pw-hidden" not in str(raised.value)


@pytest.mark.parametrize("wrong", ["dbname", "user"])
async def test_a_relay_the_server_refuses_for_good_stops_with_a_named_error(
    fresh_db_dsn: str, wrong: str
) -> None:
    """A database or a role that does not exist: the server's refusal has no SQLSTATE,
    like a lost connection, and `run()` retried it forever, silently. Before the relay
    ever connected, such a refusal is final; a server that is down is still waited out."""
    dsn = make_conninfo(fresh_db_dsn, **{wrong: f"no_such_{wrong}_{uuid.uuid4().hex[:8]}"})
    relay = OutboxRelay(dsn, CallbackPublisher(lambda event: None))
    with pytest.raises(DatabaseUnreachableError, match="does not exist"):
        await relay.run()


async def test_a_server_out_of_connections_is_waited_out(dsn: str) -> None:
    """The relay's listener connected, its round's session was refused ("too many
    connections" for the role): `run_once` names that `DatabaseUnreachableError`, and
    `run()` stopped on it for good instead of waiting until a connection was free."""
    role = f"lgd_relay_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f'CREATE ROLE "{role}" LOGIN CONNECTION LIMIT 1')
    try:
        grant_app_role(dsn, role)
        (ids,) = emit_many(dsn, 1, 1).values()
        refused, published = asyncio.Event(), asyncio.Event()

        class Refused(logging.Handler):
            def emit(self, record: logging.LogRecord) -> None:
                if "too many connections" in record.getMessage():
                    refused.set()

        relay = OutboxRelay(
            make_conninfo(dsn, user=role),
            CallbackPublisher(lambda event: published.set()),
            idle_wait=0.2,
        )
        stop = asyncio.Event()
        handler = Refused()
        logging.getLogger("langgraph_durable.outbox").addHandler(handler)
        running = asyncio.create_task(relay.run(stop))
        try:
            await asyncio.wait_for(refused.wait(), 120)
            with psycopg.connect(dsn, autocommit=True) as conn:  # a connection frees up
                conn.execute(f'ALTER ROLE "{role}" CONNECTION LIMIT 2')
            await asyncio.wait_for(published.wait(), 120)
        finally:
            stop.set()
            await asyncio.wait_for(running, 120)  # raised here when run() had stopped
            logging.getLogger("langgraph_durable.outbox").removeHandler(handler)
        assert status_of(dsn) == {"pending": 0, "dead": 0}, ids
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f'DROP OWNED BY "{role}"')
            conn.execute(f'DROP ROLE "{role}"')


async def test_the_pause_after_losing_the_database_starts_over_after_a_round(
    dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`run()` doubled its reconnect pause at each lost connection and never brought it
    back: after a few outages, each later one waited the longest pause (10 s) before
    its first retry. The relay's session is ended by the server four times (pauses 0.1,
    0.2, 0.4, 0.8 s), a round then goes through, and the next loss pauses 0.1 s again.
    The pauses are recorded, not waited: `run()` waits them with `asyncio.wait_for` on
    its stop event, which here returns at once as if each had run out."""
    (ids,) = emit_many(dsn, 1, 1).values()
    published: list[str] = []
    relay = OutboxRelay(dsn, CallbackPublisher(lambda event: published.append(event.event_id)))
    stop = asyncio.Event()
    plan = ["lose"] * 4 + ["round", "lose"]
    pauses: list[float] = []
    real_round, real_wait_for = relay.run_once, asyncio.wait_for

    async def run_once() -> RoundResult:
        step = plan.pop(0)
        if step == "lose":  # the server ends the relay's session (an admin, a restart)
            pid = (await relay._connection()).info.backend_pid
            async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as admin:
                await admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
        return await real_round()

    async def recorded(awaitable: Any, timeout: float | None) -> Any:
        if getattr(awaitable, "__qualname__", "") != "Event.wait":
            return await real_wait_for(awaitable, timeout)
        awaitable.close()  # a pause on the stop event: record it, and it has run out
        assert timeout is not None
        pauses.append(timeout)
        if not plan:
            stop.set()
        raise asyncio.TimeoutError

    relay.run_once = run_once  # type: ignore[method-assign]
    monkeypatch.setattr(asyncio, "wait_for", recorded)
    await relay.run(stop)
    assert published == ids
    assert pauses == [0.1, 0.2, 0.4, 0.8, 0.1]


async def test_prune_refuses_a_batch_that_would_never_finish(dsn: str) -> None:
    """batch=0 never returned (each statement deleted a full batch of no rows); a negative
    one was a raw psycopg error."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        for batch in (-1, 0, 2.5, True, 2**70):
            with pytest.raises(InvalidInputError, match="batch="):
                prune_published(conn, 0, batch=batch)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="whole numbers"):
        OutboxRelay(dsn, CallbackPublisher(lambda event: None), keys=2.5)  # type: ignore[arg-type]


async def test_a_key_s_events_go_out_in_commit_order_when_the_relay_sees_them_apart(
    dsn: str,
) -> None:
    """What the README's Limits say: a transaction that drew the lower `seq` but commits
    after the relay claimed the other's event is published after it."""
    got: list[int] = []
    relay = OutboxRelay(dsn, CallbackPublisher(lambda event: got.append(event.payload["n"])))
    with psycopg.connect(dsn) as first:
        emit_txn(first, "t", {"n": 1}, key="same")  # draws the lower seq, not committed
        with psycopg.connect(dsn, autocommit=True) as second, second.transaction():
            emit_txn(second, "t", {"n": 2}, key="same")
        try:
            await drain(relay)
            first.commit()
            await drain(relay)
        finally:
            await relay.aclose()
    assert got == [2, 1]
