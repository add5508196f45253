"""The outbox's pure parts: event parking per task, backoff, webhook signatures."""

from __future__ import annotations

import base64
import json
import threading
import uuid
from collections.abc import Callable
from typing import Any
from urllib.parse import unquote

import pytest
from outbox_receivers import standard_webhooks_signature, standard_webhooks_verify

from langgraph_durable import (
    ConfigurationError,
    InvalidEventError,
    InvalidInputError,
    InvalidWebhookError,
    NotInEffectError,
    current_effect_key,
)
from langgraph_durable.checkpoint import ParkedEvent, new_event
from langgraph_durable.checkpoint._events import EventParking
from langgraph_durable.outbox import (
    OutboxEvent,
    backoff_delay,
    sign_webhook,
    verify_webhook,
    webhook_key,
)
from langgraph_durable.outbox._base import (
    error_text,
    header_value,
    inbox_ids,
    is_transport_error,
    row_limit,
)
from langgraph_durable.outbox._emit import checked_event


def event(
    task: str,
    checkpoint: str,
    attempt: int = 1,
    ns: str = "",
    n: int = 0,
    token: int | None = None,
    execution: object = None,
) -> ParkedEvent:
    return new_event(
        "t",
        {"n": n},
        "k",
        thread_id="th",
        namespace=ns,
        checkpoint_id=checkpoint,
        task_id=task,
        attempt=attempt,
        fence_token=token,
        execution=execution,
    )


def test_a_task_takes_only_its_own_events_and_a_new_attempt_voids_the_old() -> None:
    parking = EventParking()
    parking.park(event("a", "c1", n=1))
    parking.park(event("b", "c1", n=2))
    parking.park(event("a", "c1", attempt=2, n=3))
    assert [
        json.loads(e.payload)["n"] for e in parking.take_for_task("th", "c1", "a", fence_token=None)
    ] == [3]
    assert parking.take_for_task("th", "c1", "a", fence_token=None) == []
    assert len(parking.take_for_task("th", "c1", "b", fence_token=None)) == 1


def test_a_new_execution_of_a_task_voids_what_an_unfinished_one_left_parked() -> None:
    """A task run again on the same checkpoint (after a cancelled run, say) is another
    execution: its first event voids the earlier one's; one execution's events add up."""
    first, second = object(), object()
    parking = EventParking()
    parking.park(event("a", "c1", n=1, execution=first))
    parking.park(event("a", "c1", n=2, execution=first))
    parking.park(event("a", "c1", n=3, execution=second))
    parking.park(event("a", "c1", n=4, execution=second))
    taken = parking.take_for_task("th", "c1", "a", fence_token=None)
    assert [json.loads(e.payload)["n"] for e in taken] == [3, 4]


def test_a_task_s_writes_take_what_its_subgraphs_left_parked_in_emission_order() -> None:
    """Events of a subgraph's tasks that no write of the subgraph stored (its node handed
    its update to the parent) go with the writes of the parent task that ran it; a sibling
    task's subgraph keeps its own."""
    parking = EventParking()
    parking.park(event("p", "c1", n=1))
    parking.park(event("x", "c7", ns="checkout:p", n=2))
    parking.park(event("y", "c8", ns="checkout:p|inner:x", n=3))
    parking.park(event("p", "c1", n=4))
    parking.park(event("z", "c9", ns="checkout:q", n=5))
    taken = parking.take_for_task("th", "c1", "p", fence_token=None)
    assert [json.loads(e.payload)["n"] for e in taken] == [1, 2, 3, 4]
    assert len(parking.take_for_task("th", "c9", "z", fence_token=None)) == 1


def test_searches_below_a_task_and_at_exit_stay_within_their_thread() -> None:
    parking = EventParking()
    other = new_event("t", {"n": 9}, "k", thread_id="other", checkpoint_id="c1", task_id="p")
    parking.park(other)
    parking.park(event("x", "c7", ns="checkout:p", n=1))
    parking.park(
        new_event("t", {"n": 8}, "k", thread_id="other", namespace="checkout:p", task_id="x")
    )
    taken = parking.take_for_task("th", "c1", "p", fence_token=None)
    assert [json.loads(e.payload)["n"] for e in taken] == [1]
    assert parking.take_for_exit("th", "", "c9", fence_token=None) == []
    at_exit = parking.take_for_exit("other", "", "c9", fence_token=None)
    assert sorted(json.loads(e.payload)["n"] for e in at_exit) == [8, 9]
    assert not parking.has_for_checkpoint("other", "c1", None)


def test_an_exit_checkpoint_carries_completed_steps_of_its_namespace_only() -> None:
    parking = EventParking()
    parking.park(event("a", "c1", n=1))
    parking.park(event("s", "c2", ns="sub:1", n=2))
    parking.park(event("p", "c3", n=3))  # pending at exit
    assert [
        json.loads(e.payload)["n"]
        for e in parking.take_for_exit("th", "sub:1", "c9", fence_token=None)
    ] == [2]
    assert [
        json.loads(e.payload)["n"] for e in parking.take_for_exit("th", "", "c3", fence_token=None)
    ] == [1]
    assert len(parking.take_for_task("th", "c3", "p", fence_token=None)) == 1


def test_a_checkpoint_has_events_until_every_task_of_it_took_its_own() -> None:
    """The `put` moving past a checkpoint waits while a task that ran on it (behind the
    put's fence) has events its `put_writes` has not taken."""
    parking = EventParking()
    assert not parking.has_for_checkpoint("th", "c1", None)
    parking.park(event("a", "c1", n=1))
    parking.park(event("a", "c1", n=2))
    parking.park(event("b", "c1", n=3))
    parking.park(event("b", "c1", n=4, token=7))  # another holder's run
    parking.park(event("c", "c2", n=5))  # a task of the next step
    assert parking.has_for_checkpoint("th", "c1", None)
    assert len(parking.take_for_task("th", "c1", "a", fence_token=None)) == 2
    assert parking.has_for_checkpoint("th", "c1", None)
    assert len(parking.take_for_task("th", "c1", "b", fence_token=None)) == 1
    assert not parking.has_for_checkpoint("th", "c1", None)
    assert parking.has_for_checkpoint("th", "c1", 7)
    assert parking.has_for_checkpoint("th", "c2", None)
    assert not parking.has_for_checkpoint("other", "c2", None)
    parking.take_for_exit("th", "", "c9", fence_token=None)
    assert not parking.has_for_checkpoint("th", "c2", None)
    assert parking.take_for_task("th", "c1", "a", fence_token=None) == []


def test_events_are_carried_only_behind_the_fence_of_the_run_that_emitted_them() -> None:
    """Two holders of one thread in one process (a stale run and the one that took over)
    run the same tasks on the same checkpoint: each statement takes only its own events."""
    parking = EventParking()
    parking.park(event("a", "c1", n=1, token=1))
    parking.park(event("a", "c1", n=2, token=2))
    parking.park(event("b", "c2", n=3, token=1))
    parking.park(event("b", "c2", n=4, token=2))
    taken = parking.take_for_task("th", "c1", "a", fence_token=2)
    assert [json.loads(e.payload)["n"] for e in taken] == [2]
    assert parking.take_for_task("th", "c1", "a", fence_token=None) == []
    at_exit = parking.take_for_exit("th", "", "c9", fence_token=1)
    assert [json.loads(e.payload)["n"] for e in at_exit] == [1, 3]
    assert [
        json.loads(e.payload)["n"] for e in parking.take_for_exit("th", "", "c9", fence_token=2)
    ] == [4]


def test_bad_events_are_refused() -> None:
    with pytest.raises(ValueError, match="non-empty"):
        new_event("", {}, "k")
    with pytest.raises(TypeError):
        new_event("t", {"x": object()}, "k")
    with pytest.raises(ValueError, match="NUL"):
        new_event("t", {"x": "\x00"}, "k")
    with pytest.raises(ValueError, match="NUL"):
        new_event("t", {"x": "\\\x00"}, "k")  # a backslash, then a NUL
    with pytest.raises(ValueError, match="lone surrogate"):
        new_event("t", {"x": "\ud800"}, "k")
    with pytest.raises(ValueError, match="lone surrogates"):
        new_event("t\ud800", {}, "k")
    with pytest.raises(ValueError, match="lone surrogates"):
        new_event("t", {}, "k\ud800")


def test_text_that_spells_a_nul_escape_is_no_nul() -> None:
    """A backslash followed by "u0000" is six characters of text, which jsonb stores."""
    event = new_event("t", {"x": "\\u0000", "y": "\\\\u0000"}, "k")
    assert json.loads(event.payload) == {"x": "\\u0000", "y": "\\\\u0000"}


def test_error_text_hides_the_credentials_of_every_url() -> None:
    error = ConnectionError(
        "amqp://guest:pw1@h:5672/ failed; then https://tok3n@hooks.example/x?u=a@b; "
        "'nats://u:p@w@n:4222' too; https://hooks.slack.example/services/T0/B0/SECRET, "
        "http://plain.example stays"
    )
    assert error_text(error) == (
        "ConnectionError: amqp://***@h:5672/… failed; then https://***@hooks.example/…; "
        "'nats://***@n:4222' too; https://hooks.slack.example/…, "
        "http://plain.example stays"
    )


def test_error_text_drops_what_postgres_text_cannot_hold() -> None:
    """A broker's message may quote binary data: a NUL or a lone surrogate in the stored
    error would make Postgres refuse the statement that records the failure."""
    quoted = b"frame \x00\x01\xff".decode("utf-8", "surrogateescape")  # \udcff: lone
    assert error_text(RuntimeError(quoted)) == "RuntimeError: frame \x01"
    assert error_text(RuntimeError("a \ud800 b 😀")) == "RuntimeError: a  b 😀"


def test_error_text_is_short_and_linear_on_long_text() -> None:
    """An error's text is cut before the URLs are looked for: a long one cannot hold up
    the relay's event loop (before, 20,000 characters took seconds)."""
    text = error_text(ValueError("x" * 100_000 + "://" + "y" * 100_000))
    assert len(text) <= 4000


@pytest.mark.parametrize("shift", range(40))
def test_error_text_masks_a_url_before_it_cuts_the_text(shift: int) -> None:
    """The text was cut to 4,000 characters before its URLs were masked: a cut inside a
    URL's `user:password@` hid the `@`, and what came before the cut was shown."""
    url = "amqp://guest:s3cretpassword@broker.example:5672/"
    text = error_text(RuntimeError("x" * (3960 + shift) + " " + url))
    assert "guest" not in text
    assert "s3c" not in text


def test_error_text_drops_a_url_cut_where_it_stops_looking() -> None:
    """Only the first 16,000 characters are looked at; a URL cut there may have lost its
    `@`, and the long paths masked before it can bring it within what is kept."""
    first = "https://hooks.example/" + "p" * 15_950
    text = error_text(RuntimeError(f"{first} amqp://guest:s3cretpassword@broker.example/"))
    assert text == "RuntimeError: https://hooks.example/… "


def test_header_values_are_percent_encoded_utf8_that_unquote_reads_back() -> None:
    """httpx sends header values as ASCII: an event key such as `commande-été` (a thread
    id, the key's default) failed every attempt with UnicodeEncodeError."""
    for text in ["order-1", "commande-été", "a b", "50%", "x\r\ny", "a/b:c=d;e?f&g"]:
        encoded = header_value(text)
        assert encoded.isascii()
        assert encoded.isprintable()
        assert " " not in encoded
        assert unquote(encoded) == text
    assert header_value("order.shipped-1/a:b") == "order.shipped-1/a:b"  # ASCII as it was


@pytest.mark.parametrize(
    ("make", "url"),
    [
        ("rabbitmq", "amqp://guest:s3cret@127.0.0.1:56720000/"),
        ("rabbitmq", "amqp://guest:s3cret@127.0.0.1:port/"),
        ("rabbitmq", "http://guest:s3cret@127.0.0.1/"),
        ("rabbitmq", "amqp://guest:s3cret@/"),
        ("nats", "nats://user:s3cret@127.0.0.1:422200"),
        ("nats", "nats://user:s3cret@:4222"),
        ("nats", "amqp://user:s3cret@127.0.0.1:4222"),
        ("webhook", "https://user:s3cret@hooks.example:99999/x"),
        ("webhook", "ftp://user:s3cret@hooks.example/x"),
        ("webhook", "hooks.example/x"),
    ],
)
def test_a_malformed_broker_url_is_refused_when_the_publisher_is_made(make: str, url: str) -> None:
    """It was read when the first event was published: every publish failed, counted
    against its event, and every event went dead (a port out of range, a typo)."""
    from langgraph_durable.outbox.publishers import (
        NatsPublisher,
        RabbitMQPublisher,
        WebhookPublisher,
    )

    makers: dict[str, Callable[[str], object]] = {
        "rabbitmq": RabbitMQPublisher,
        "nats": lambda url: NatsPublisher([url]),
        "webhook": lambda url: WebhookPublisher(url, "secret"),
    }
    with pytest.raises(ConfigurationError) as raised:
        makers[make](url)
    assert "s3cret" not in str(raised.value)
    assert "Publisher: the URL" in str(raised.value)


def test_well_formed_broker_urls_are_taken() -> None:
    from langgraph_durable.outbox.publishers import (
        NatsPublisher,
        RabbitMQPublisher,
        WebhookPublisher,
    )

    RabbitMQPublisher("amqps://guest:guest@[::1]/vhost")
    NatsPublisher(["127.0.0.1:4222", "tls://h.example", "nats://u:p@h.example:4222"])
    WebhookPublisher("http://127.0.0.1:8080/hook", "secret")


async def test_an_event_type_nats_cannot_publish_to_is_a_named_failure_of_the_event() -> None:
    """A type with a space failed with nats-py's "nats: invalid subject", and one with a
    wildcard went to the stream under the literal subject `a.*`. Either is refused by
    name before connecting; a subject given to the publisher is checked when it is made."""
    from langgraph_durable.outbox.publishers import NatsPublisher

    with pytest.raises(ConfigurationError, match=r"subject 'orders\.\*'"):
        NatsPublisher("nats://127.0.0.1:1", subject="orders.*")
    publisher = NatsPublisher("nats://127.0.0.1:1")  # nothing listens: never reached
    for bad in ["order shipped", "orders.*", "orders.>", "orders..x", ".orders", "orders."]:
        with pytest.raises(InvalidEventError, match="not a subject NATS publishes to"):
            await publisher.publish(OutboxEvent(str(uuid.uuid4()), bad, "k", {}, seq=1))
    assert publisher._client is None


async def test_a_callback_publisher_runs_a_plain_function_off_the_event_loop() -> None:
    """A plain function ran on the event loop: publish_timeout could not stop a slow one,
    and the relay's other keys waited for it."""
    from langgraph_durable.outbox.publishers import CallbackPublisher

    loop_thread = threading.get_ident()
    ran_in: list[int] = []
    await CallbackPublisher(lambda event: ran_in.append(threading.get_ident())).publish(
        OutboxEvent("e", "t", "k", {}, seq=1)
    )
    assert len(ran_in) == 1
    assert ran_in[0] != loop_thread

    class Handler:
        async def __call__(self, event: OutboxEvent) -> None:
            ran_in.append(threading.get_ident())

    await CallbackPublisher(Handler()).publish(OutboxEvent("e", "t", "k", {}, seq=1))
    assert ran_in[1] == loop_thread  # a coroutine: awaited on the loop


def test_only_failures_that_sent_nothing_are_transport_errors() -> None:
    """They spend no attempts of the event. A failure that may come after the broker got
    the message (a read timeout, a dropped connection, `publish_timeout`) or that is
    about the event itself does: counted as an outage, one such event stalled the relay."""
    import socket

    import aiormq.exceptions
    import httpx
    import nats.errors

    from langgraph_durable.outbox import BrokerUnreachableError
    from langgraph_durable.outbox.publishers import UnroutableError

    request = httpx.Request("POST", "https://hooks.example/x")
    unreachable = [
        ConnectionRefusedError(111, "Connect call failed"),
        socket.gaierror(-2, "Name or service not known"),
        BrokerUnreachableError("cannot connect to the broker: AMQPConnectionError: ..."),
        aiormq.exceptions.ChannelInvalidStateError("channel closed"),
        httpx.ConnectError("refused", request=request),
        httpx.ConnectTimeout("slow to connect", request=request),
        httpx.PoolTimeout("no connection free", request=request),
        nats.errors.NoServersError(),
        nats.errors.ConnectionClosedError(),
        nats.errors.OutboundBufferLimitError(),
    ]
    counted = [
        RuntimeError("receiver refused it"),
        ValueError("bad payload"),
        UnroutableError("no queue"),
        httpx.HTTPStatusError(
            "500", request=request, response=httpx.Response(500, request=request)
        ),
        nats.errors.MaxPayloadError(),
        TimeoutError(),  # also asyncio.TimeoutError: the relay's publish_timeout
        OSError(28, "No space left on device"),
        ConnectionResetError(104, "Connection reset by peer"),
        aiormq.exceptions.AMQPConnectionError("closed while publishing"),
        httpx.ReadTimeout("slow", request=request),
        httpx.RemoteProtocolError("Server disconnected", request=request),
        httpx.ReadError("reset", request=request),
        nats.errors.TimeoutError(),
    ]
    assert [is_transport_error(e) for e in unreachable] == [True] * len(unreachable)
    assert [is_transport_error(e) for e in counted] == [False] * len(counted)


def test_backoff_doubles_up_to_the_cap() -> None:
    assert [backoff_delay(n, base=1, cap=5) for n in range(5)] == [0.0, 1.0, 2.0, 4.0, 5.0]


def test_verify_webhook_rejects_old_timestamps_and_changed_bodies() -> None:
    body = json.dumps({"a": 1}).encode()
    headers = sign_webhook(b"k", "id-1", 1000, body)
    assert verify_webhook(b"k", headers, body, now=1000) == "id-1"
    with pytest.raises(ValueError, match="tolerance"):
        verify_webhook(b"k", headers, body, now=1000 + 301)
    with pytest.raises(ValueError, match="does not match"):
        verify_webhook(b"k", headers, body + b" ", now=1000)
    with pytest.raises(ValueError, match="missing"):
        verify_webhook(b"k", {}, body, now=1000)
    # Named, and still the ValueError it always was.
    with pytest.raises(InvalidWebhookError, match="whole number") as raised:
        verify_webhook(b"k", {**headers, "webhook-timestamp": "soon"}, body, now=1000)
    assert isinstance(raised.value, ValueError)
    # Any malformed timestamp is refused as such; 400 digits raised OverflowError.
    fullwidth = "\uff11\uff10\uff10\uff10"  # int() reads it as 1000
    for malformed in ("9" * 400, "9" * 5000, "1e9", " 1000", fullwidth, "1_000", "+-1"):
        with pytest.raises(InvalidWebhookError, match="whole number"):
            verify_webhook(b"k", {**headers, "webhook-timestamp": malformed}, body, now=1000.0)


SPEC_SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
"""The Standard Webhooks test vector (the specification's reference libraries test it)."""
SPEC_ID, SPEC_TIMESTAMP, SPEC_BODY = (
    "msg_p5jXN8AQM9LWM0D4loKWxJek",
    1614265330,
    b'{"test": 2432232314}',
)
SPEC_SIGNATURE = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="


def test_webhooks_are_signed_exactly_as_standard_webhooks_specifies() -> None:
    """Called "Standard Webhooks style", the signature was `v1=<hex>` keyed by the raw
    secret, which no receiver following the specification accepts."""
    # The independent implementation reproduces the published vector ...
    assert (
        standard_webhooks_signature(SPEC_SECRET, SPEC_ID, str(SPEC_TIMESTAMP), SPEC_BODY)
        == SPEC_SIGNATURE
    )
    # ... and the package signs the vector the same way.
    headers = sign_webhook(SPEC_SECRET, SPEC_ID, SPEC_TIMESTAMP, SPEC_BODY)
    assert headers == {
        "webhook-id": SPEC_ID,
        "webhook-timestamp": str(SPEC_TIMESTAMP),
        "webhook-signature": SPEC_SIGNATURE,
    }
    # A receiver following the specification accepts any delivery the package signs.
    body = json.dumps({"order": "8890", "note": "naïve"}).encode()
    signed = sign_webhook(SPEC_SECRET, "e-1", 1_700_000_000, body)
    assert standard_webhooks_verify(SPEC_SECRET, signed, body, now=1_700_000_100) == "e-1"
    with pytest.raises(ValueError, match="no matching"):
        standard_webhooks_verify(SPEC_SECRET, signed, body + b" ", now=1_700_000_100)
    # And `verify_webhook` accepts the specification's own form, several signatures
    # (a secret being rotated) included.
    rotated = {**headers, "webhook-signature": "v1,bm9wZQ== " + SPEC_SIGNATURE}
    assert verify_webhook(SPEC_SECRET, rotated, SPEC_BODY, now=SPEC_TIMESTAMP) == SPEC_ID
    with pytest.raises(InvalidWebhookError, match="does not match"):
        verify_webhook(
            SPEC_SECRET, {**headers, "webhook-signature": "v1=ü"}, SPEC_BODY, now=SPEC_TIMESTAMP
        )


def test_a_webhook_secret_is_whsec_base64_or_other_text_s_utf8_or_the_key() -> None:
    key = base64.b64decode("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
    assert webhook_key(SPEC_SECRET) == key
    assert webhook_key("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw") == b"MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
    assert webhook_key("my-shared-secret") == webhook_key(b"my-shared-secret")
    assert sign_webhook(key, SPEC_ID, SPEC_TIMESTAMP, SPEC_BODY)["webhook-signature"] == (
        SPEC_SIGNATURE
    )
    for bad in ("", b""):
        with pytest.raises(InvalidInputError, match="empty"):
            webhook_key(bad)
    with pytest.raises(InvalidInputError, match="not base64: copy the whole secret") as raised:
        webhook_key("whsec_not base64!")
    assert "not base64!" not in str(raised.value)  # the secret is not echoed


@pytest.mark.parametrize("secret", ["mysecret1234", "my-shared-secret", SPEC_SECRET])
def test_the_cli_s_publisher_and_verify_webhook_read_one_secret_alike(
    secret: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The CLI took text without `whsec_` as its UTF-8 bytes, `verify_webhook` and
    `WebhookPublisher` as base64: `mysecret1234` gave another key (every delivery "does
    not match"), `my-shared-secret` made `verify_webhook` raise InvalidInputError."""
    from langgraph_durable.outbox.publishers import (
        WEBHOOK_SECRET_ENV,
        WebhookPublisher,
        publisher_for,
    )

    monkeypatch.setenv(WEBHOOK_SECRET_ENV, secret)
    cli = publisher_for("https://hooks.example/x")
    library = WebhookPublisher("https://hooks.example/x", secret)
    assert cli._key == library._key == webhook_key(secret)
    body = b'{"a":1}'
    headers = sign_webhook(cli._key, "msg_1", 1_700_000_000, body)
    assert verify_webhook(secret, headers, body, now=1_700_000_000) == "msg_1"


def test_current_effect_key_outside_an_effect_is_named() -> None:
    with pytest.raises(NotInEffectError, match="inside an @effect") as raised:
        current_effect_key()
    assert isinstance(raised.value, LookupError)


def test_wrong_outbox_inputs_are_refused_before_any_database_sees_them() -> None:
    """A payload deeper than Python's recursion limit, an `events()` limit that is no
    whole number >= 1, and an inbox id Postgres cannot store each name what to change."""
    deep: list[Any] = []
    for _ in range(5000):
        deep = [deep]
    with pytest.raises(InvalidEventError, match="nested too deeply"):
        checked_event("deep", deep, "k")
    assert checked_event("shallow", [[[1]]], "k").payload == "[[[1]]]"
    assert row_limit(1) == 1
    assert row_limit(2**63 - 1) == 2**63 - 1
    for limit in (0, -1, 2**63, 1.0, "5", None, False):
        with pytest.raises(InvalidInputError, match="limit="):
            row_limit(limit)
    some_id = uuid.uuid4()
    assert inbox_ids("mailer", some_id) == ("mailer", str(some_id))
    for consumer, message_id in (("a\x00", "m"), ("a", "\udc80"), ("a", ""), (None, "m")):
        with pytest.raises(InvalidInputError, match="inbox: "):
            inbox_ids(consumer, message_id)
