"""Publishers the relay sends events through; each broker client is an optional extra.

- `CallbackPublisher`: an in-process coroutine, or a function run in a worker thread
  (tests, small apps);
- `RabbitMQPublisher` (`pip install 'langgraph-durable[rabbitmq]'`, aio-pika): publisher
  confirms, persistent messages, `message_id` = event id, routing key = event type; a
  message no queue takes is a failed publish (`UnroutableError`), never a published one;
- `NatsPublisher` (`[nats]`, nats-py): JetStream publish acknowledged by the stream, header
  `Nats-Msg-Id` = event id, so the stream's own window drops duplicates. The
  `event-type` and `event-key` headers are percent-encoded UTF-8 (`header_value`), as
  for webhooks: nats-py turns a line break in a header value into a space and trims
  the value, so a key holding one reached consumers changed; each message says so in
  `event-headers-encoding: percent` (messages from before the encoding lack it);
- `WebhookPublisher` (`[webhook]`, httpx): POST signed as Standard Webhooks specifies
  (`webhook-id`, `webhook-timestamp`, `webhook-signature: v1,<base64 HMAC-SHA256>`), so
  a receiver's Standard Webhooks library accepts it, as does `verify_webhook`. Any
  answer but 2xx is a failure, retried by the relay. The `event-type` and `event-key`
  headers are percent-encoded UTF-8 (`header_value`): read them with
  `urllib.parse.unquote`.

Every message carries the event id, type and key, so consumers dedupe by id. RabbitMQ
headers carry any text as it is (AMQP field tables are length-prefixed), so the AMQP
publisher sends the type and key unencoded.

A broker URL is checked when the publisher is made (`ConfigurationError`, the URL's
password never repeated): a malformed one failed every publish, and every event went
dead. The broker publishers share one connect among the keys the relay publishes at
once (`_SharedConnect`), and give the relay a `connect()` it waits for outside each
publish's `publish_timeout`.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import logging
import os
import re
import time
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.parse import urlsplit

from langgraph_durable.errors import (
    ConfigurationError,
    InvalidEventError,
    InvalidInputError,
    MissingExtraError,
)
from langgraph_durable.outbox._base import (
    BrokerUnreachableError,
    OutboxEvent,
    error_text,
    header_value,
    mask_urls,
    sign_webhook,
    webhook_key,
)

__all__ = [
    "CallbackPublisher",
    "NatsPublisher",
    "RabbitMQPublisher",
    "UnroutableError",
    "WebhookPublisher",
    "publisher_for",
]

WEBHOOK_SECRET_ENV = "LANGGRAPH_DURABLE_WEBHOOK_SECRET"

logger = logging.getLogger("langgraph_durable.outbox")

CONNECT_TIMEOUT = 10.0
"""Seconds a broker connection may take to open. A broker that accepts the connection and
never answers (a hung server, a firewall that drops packets) made the connect wait for the
relay's `publish_timeout`, which counts against the event: a broker outage spent the
events' attempts."""


def _positive(seconds: float, who: str) -> float:
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not seconds > 0:
        raise InvalidInputError(f"{who}: give connect_timeout as a positive number of seconds.")
    return float(seconds)


def _headers(event: OutboxEvent) -> dict[str, Any]:
    return {"event-id": event.event_id, "event-type": event.event_type, "event-key": event.key}


HEADERS_ENCODING = ("event-headers-encoding", "percent")
"""The header a NATS message carries to say its `event-type` and `event-key` are
percent-encoded: consumers could not tell an encoded value from one sent as it was
(before the encoding, `50%25-off` may have been the key itself)."""


def _encoded_headers(event: OutboxEvent) -> dict[str, str]:
    """`_headers` percent-encoded (`header_value`), for transports whose header values
    are not any text: HTTP's are ASCII, and NATS trims them and turns CR and LF into
    spaces. The id, a UUID, reads as it is."""
    return {name: header_value(value) for name, value in _headers(event).items()}


def _checked_url(url: object, schemes: Sequence[str], who: str) -> str:
    """`url` if it names a host (and a valid port) under one of `schemes`, else
    `ConfigurationError` saying what is wrong, the URL shown without its password."""
    expected = ", ".join(f"{scheme}://" for scheme in schemes)
    if not isinstance(url, str):
        raise ConfigurationError(f"{who}: give the broker URL as a string ({expected}).")
    shown = _shown_url(url)
    try:
        parts = urlsplit(url)
        port = parts.port  # ValueError: not a number, or above 65535
    except ValueError as exc:
        raise ConfigurationError(f"{who}: the URL {shown} is malformed ({exc}); fix it.") from None
    if parts.scheme.lower() not in schemes:
        raise ConfigurationError(f"{who}: the URL {shown} must start with {expected}.")
    if not parts.hostname or re.search(r"\s", parts.hostname):
        raise ConfigurationError(f"{who}: the URL {shown} names no host; give one.")
    if port == 0:
        raise ConfigurationError(f"{who}: the URL {shown} names port 0; a port is 1 to 65535.")
    return url


def _shown_url(url: str) -> str:
    """A URL for a message: its scheme and host only, never a password (even where the
    URL is too malformed for `mask_urls` to find its parts)."""
    scheme, found, rest = url.partition("://")
    if not found or not re.fullmatch(r"[A-Za-z][A-Za-z0-9+.-]{0,31}", scheme):
        return "(not shown: it has no scheme://)"
    netloc = re.split(r"[/?#]", rest, maxsplit=1)[0]
    _, at, host = netloc.rpartition("@")
    return f"{scheme}://{'***@' if at else ''}{host}{'/…' if len(netloc) < len(rest) else ''}"


def _is_async(callback: object) -> bool:
    # An object with `async def __call__` is a coroutine function only through it.
    call = getattr(callback, "__call__", None)  # noqa: B004 - not a test of callable()
    return inspect.iscoroutinefunction(callback) or inspect.iscoroutinefunction(call)


class CallbackPublisher:
    """Hands each event to `callback`, a coroutine function or a plain function.

    A plain function runs in a worker thread of the publisher's own (up to
    `CALLBACK_THREADS` at once, more than the relay's default `keys`), so the relay's
    `publish_timeout` holds for it and it does not stop the event loop: run on the loop,
    a slow one counted as published however long it took, and held back every other
    key. (On the loop's default executor, a few threads on a small machine, calls queued
    for a thread ran out their `publish_timeout` before they started, and their events
    went dead uncalled.) Calls for different keys may run at once: make it thread-safe.
    One that outlasts `publish_timeout` counts as failed, but its thread runs on to its
    end.
    """

    def __init__(self, callback: Callable[[OutboxEvent], Awaitable[None] | None]) -> None:
        self.callback = callback
        self._in_thread = not _is_async(callback)
        self._threads: ThreadPoolExecutor | None = None

    async def publish(self, event: OutboxEvent) -> None:
        if self._in_thread:
            if self._threads is None:
                self._threads = ThreadPoolExecutor(
                    CALLBACK_THREADS, thread_name_prefix="outbox-callback"
                )
            context = contextvars.copy_context()
            loop = asyncio.get_running_loop()
            result = await loop.run_in_executor(self._threads, context.run, self.callback, event)
        else:
            result = self.callback(event)
        if inspect.isawaitable(result):
            await result

    async def aclose(self) -> None:
        """Let the worker threads go (calls under way run to their end)."""
        threads, self._threads = self._threads, None
        if threads is not None:
            threads.shutdown(wait=False)


CALLBACK_THREADS = 128
"""Worker threads of a `CallbackPublisher` for plain functions: one per key of a round at
the relay's default `keys` (100), with room to spare."""


class _SharedConnect:
    """One connect at a time, shared by everyone who needs the connection meanwhile.

    The relay publishes up to `keys` keys at once, so on a round's first publish many
    coroutines need the connection together: one connects, and the others wait for that
    connect and get its outcome, its `BrokerUnreachableError` included. They queued on a
    lock before and each connected again once the previous one had failed: the last key
    waited for every connect before it, and those waits ran into the relay's
    `publish_timeout`, which spends the event's attempts (a broker outage turned events
    dead). A waiter that is cancelled (its `publish_timeout`) leaves the connect to the
    others.
    """

    _attempt: asyncio.Future[None] | None = None

    def _is_open(self) -> bool:
        raise NotImplementedError

    async def _open(self) -> None:
        """Connect, replacing a closed connection (the subclass's own)."""
        raise NotImplementedError

    async def connect(self) -> None:
        """Return once there is an open connection, connecting first if need be, or raise
        `BrokerUnreachableError`. The relay calls it before a key's publishes, outside
        their `publish_timeout`; `publish` calls it again (a connection may have closed)."""
        while not self._is_open():
            attempt = self._attempt
            if attempt is None:
                attempt = self._attempt = asyncio.ensure_future(self._open())
                attempt.add_done_callback(self._attempt_done)
            await asyncio.shield(attempt)

    def _attempt_done(self, attempt: asyncio.Future[None]) -> None:
        if self._attempt is attempt:
            self._attempt = None
        if not attempt.cancelled():
            attempt.exception()  # retrieved: its waiters raise it, or none is left to

    async def _stop_connecting(self) -> None:
        """Cancel a connect under way (`aclose`): nobody may wait for it any more."""
        attempt, self._attempt = self._attempt, None
        if attempt is not None and not attempt.done():
            attempt.cancel()
            await asyncio.gather(attempt, return_exceptions=True)


class UnroutableError(Exception):
    """RabbitMQ returned the message: no queue is bound to its routing key on the exchange.

    The event stays pending and is tried again (a failed attempt): declare a queue that
    takes it (with the default exchange, a queue named after the routing key), or give
    the relay a routing key or exchange that reaches one.
    """


class RabbitMQPublisher(_SharedConnect):
    """Publishes to a RabbitMQ exchange with publisher confirms.

    Every message is `mandatory`: one that no queue takes is returned by the broker and
    raises `UnroutableError`, so the relay never marks an event published that no queue
    holds. With the default exchange the routing key (the event type unless given) must
    be a queue's name.

    Args:
        url: An AMQP URL, e.g. "amqp://guest:guest@127.0.0.1:5672/".
        exchange: The exchange name ("" is the default exchange: the routing key is then
            a queue name).
        routing_key: The routing key; the event type when None.
        connect_timeout: Seconds a connection may take to open; longer is an outage
            (`BrokerUnreachableError`: nothing was sent, no attempt is spent). Keep it
            below the relay's `publish_timeout`, which counts against the event.
    """

    def __init__(
        self,
        url: str,
        *,
        exchange: str = "",
        routing_key: str | None = None,
        connect_timeout: float = CONNECT_TIMEOUT,
    ) -> None:
        try:
            import aio_pika
        except ImportError as exc:
            raise MissingExtraError(
                "RabbitMQPublisher needs aio-pika: pip install 'langgraph-durable[rabbitmq]'"
            ) from exc
        self._aio_pika = aio_pika
        self.url = _checked_url(url, ("amqp", "amqps"), "RabbitMQPublisher")
        try:
            aio_pika.connection.make_url(url)  # what `_connect` does with it
        except (TypeError, ValueError) as exc:
            raise ConfigurationError(
                f"RabbitMQPublisher: the URL {_shown_url(url)} is malformed "
                f"({mask_urls(str(exc))}); fix it."
            ) from None
        self.connect_timeout = _positive(connect_timeout, "RabbitMQPublisher")
        self.exchange_name = exchange
        self.routing_key = routing_key
        self._connection: Any = None
        self._channel: Any = None
        self._exchange: Any = None

    def _is_open(self) -> bool:
        return (
            self._connection is not None
            and not self._connection.is_closed
            and self._channel is not None
            and not self._channel.is_closed
        )

    async def _open(self) -> None:
        """Connect when there is no open connection or channel (`_SharedConnect`: one
        connection however many keys publish at once; each opened its own before, and
        all but the last leaked). The broker closes a channel on some errors (an
        exchange deleted under it) and leaves the connection open: every later publish
        on it failed, for good, so a closed channel means a new connection."""
        await self._close_connection()
        self._connection, self._channel, self._exchange = await self._connect()

    async def _ready(self) -> Any:
        """The exchange, connecting first when there is no open connection or channel."""
        await self.connect()
        return self._exchange

    async def _connect(self) -> tuple[Any, Any, Any]:
        # A plain connection, reopened by `_ready` once closed: a robust one whose first
        # connect is cancelled or times out keeps reconnecting in the background, for good.
        # Made here rather than by aio_pika.connect, which drops the connection unclosed
        # when the connect fails: its __del__ then schedules close() on whichever loop is
        # current when the collector runs, and that coroutine may never be awaited.
        connection = self._aio_pika.Connection(self._aio_pika.connection.make_url(self.url))
        try:
            await _connecting(
                connection.connect(timeout=self.connect_timeout), self.connect_timeout
            )
            # on_return_raises: aio-pika's default (False) hands a returned message to
            # callbacks and lets `publish` succeed, which would mark a lost event published.
            channel = await connection.channel(publisher_confirms=True, on_return_raises=True)
            exchange = (
                await channel.get_exchange(self.exchange_name)
                if self.exchange_name
                else channel.default_exchange
            )
        except BaseException:
            await connection.close()  # a missing exchange, say: do not leave it open
            raise
        return connection, channel, exchange

    async def publish(self, event: OutboxEvent) -> None:
        exchange = await self._ready()
        message = self._aio_pika.Message(
            body=event.body(),
            message_id=event.event_id,
            type=event.event_type,
            content_type="application/json",
            delivery_mode=self._aio_pika.DeliveryMode.PERSISTENT,
            headers=dict(_headers(event)),
        )
        routing_key = self.routing_key or event.event_type
        # Publisher confirms: publish returns once the broker has taken the message and
        # raises when it nacks it; with mandatory=True and on_return_raises=True it also
        # raises when the broker returns it because no queue is bound to the routing key.
        try:
            await exchange.publish(message, routing_key=routing_key, mandatory=True)
        except self._aio_pika.exceptions.PublishError as exc:
            frame: Any = exc.frame  # a Basic.Return: reply_code 312, NO_ROUTE
            raise UnroutableError(
                f"RabbitMQ returned event {event.event_id} ({frame.reply_code} "
                f"{frame.reply_text}): no queue is bound to routing key {routing_key!r} on "
                f"{_exchange_named(self.exchange_name)}; declare a queue that takes it"
                + (" (one named after the routing key)" if not self.exchange_name else "")
                + " or give another routing key"
            ) from exc

    async def aclose(self) -> None:
        await self._stop_connecting()
        await self._close_connection()

    async def _close_connection(self) -> None:
        connection, self._connection = self._connection, None
        self._channel = self._exchange = None
        if connection is not None:
            await connection.close()


async def _connecting(connect: Awaitable[Any], timeout: float) -> Any:
    """What `connect` returns within `timeout` seconds; a failure to connect, or no
    answer in time, as `BrokerUnreachableError` (nothing was sent: the relay spends no
    attempt), quoting the client's error. Errors raised while publishing on the
    connection are not wrapped: they count against the event."""
    try:
        return await asyncio.wait_for(connect, timeout)
    except TimeoutError as exc:
        raise BrokerUnreachableError(
            f"cannot connect to the broker: no answer within {timeout:g} s"
        ) from exc
    except Exception as exc:
        raise BrokerUnreachableError(f"cannot connect to the broker: {error_text(exc)}") from exc


def _exchange_named(name: str) -> str:
    return f"exchange {name!r}" if name else "the default exchange"


class NatsPublisher(_SharedConnect):
    """Publishes to NATS JetStream; the stream acknowledges each message.

    Headers `Nats-Msg-Id` and `event-id` carry the event id; `event-type` and
    `event-key` are percent-encoded UTF-8 (`header_value`; read them with
    `urllib.parse.unquote`), since nats-py trims a header value and turns its line
    breaks into spaces: a key like `line1\nline2` reached consumers as `line1 line2`.
    Every message says so in `event-headers-encoding: percent` (`HEADERS_ENCODING`):
    messages published before the encoding came lack it, and a consumer reading both
    kinds from a stream tells them apart by it.

    Args:
        servers: NATS server URL(s), e.g. "nats://127.0.0.1:4222".
        subject: The subject; the event type when None.
        connect_timeout: Seconds a connection may take to open; longer is an outage
            (`BrokerUnreachableError`), as for `RabbitMQPublisher`.
    """

    def __init__(
        self,
        servers: str | list[str],
        *,
        subject: str | None = None,
        connect_timeout: float = CONNECT_TIMEOUT,
    ) -> None:
        try:
            import nats
        except ImportError as exc:
            raise MissingExtraError(
                "NatsPublisher needs nats-py: pip install 'langgraph-durable[nats]'"
            ) from exc
        self._nats = nats
        for server in [servers] if isinstance(servers, str) else list(servers):
            # nats-py's own reading: a bare "host:port" is a nats:// URL.
            if isinstance(server, str) and "://" not in server:
                server = f"nats://{server}"
            _checked_url(server, ("nats", "tls", "ws", "wss"), "NatsPublisher")
        self.servers = servers
        self.connect_timeout = _positive(connect_timeout, "NatsPublisher")
        if subject is not None and not _is_subject(subject):
            raise ConfigurationError(
                f"NatsPublisher: subject {subject!r} is not a subject NATS publishes to: "
                "give dot-separated tokens without spaces or wildcards (* and >)."
            )
        self.subject = subject
        self._client: Any = None
        self._js: Any = None

    def _is_open(self) -> bool:
        return self._client is not None and not self._client.is_closed

    async def _open(self) -> None:
        """Connect when there is no open client; one connection however many keys the
        relay publishes at once (`_SharedConnect`)."""
        await self._close_client()
        client = await _connecting(self._connect(), self.connect_timeout)
        self._client, self._js = client, client.jetstream()

    async def _ready(self) -> Any:
        """The JetStream context, connecting first when there is no open client."""
        await self.connect()
        return self._js

    def _connect(self) -> Awaitable[Any]:
        """nats-py's connect, failing fast: by default it tries a refused server 60 times,
        2 s apart, before it gives up, far longer than the relay's `publish_timeout`. One
        try again is enough: the relay treats the failure as an outage and tries again
        itself. The client's own error log goes to debug; the relay reports the outage.

        Without reconnecting (`allow_reconnect=False`): while nats-py reconnected by
        itself, publishes were buffered and failed with "nats: timeout", which counts
        against the event, so a broker restart spent attempts. A client that lost its
        server is closed now; the next publish connects again (`_SharedConnect`), and a
        refusal is an outage that spends none."""

        async def quiet(error: Exception) -> None:
            logger.debug("NATS client: %s", error_text(error))

        return self._nats.connect(
            self.servers,
            connect_timeout=self.connect_timeout,
            allow_reconnect=False,
            max_reconnect_attempts=1,
            reconnect_time_wait=0.5,
            error_cb=quiet,
        )

    async def publish(self, event: OutboxEvent) -> None:
        subject = self.subject or event.event_type
        if not _is_subject(subject):
            # nats-py refuses a space ("nats: invalid subject"); a wildcard went to the
            # stream as the literal subject. Either way a failure of this event.
            raise InvalidEventError(
                f"event {event.event_id}: its type {subject!r} is not a subject NATS "
                "publishes to (dot-separated tokens without spaces or wildcards * and >); "
                "give NatsPublisher a subject=, or emit a type made of such tokens"
            )
        js = await self._ready()
        await js.publish(
            subject,
            event.body(),
            headers={
                "Nats-Msg-Id": event.event_id,
                **_encoded_headers(event),
                HEADERS_ENCODING[0]: HEADERS_ENCODING[1],
            },
        )

    async def aclose(self) -> None:
        await self._stop_connecting()
        await self._close_client()

    async def _close_client(self) -> None:
        client, self._client, self._js = self._client, None, None
        if client is not None and not client.is_closed:
            await client.close()


_SUBJECT_TOKEN = re.compile(r"[^\s.*>]+")


def _is_subject(subject: str) -> bool:
    """Whether NATS publishes to `subject`: dot-separated, non-empty tokens without
    whitespace or the wildcards `*` and `>`."""
    return bool(subject) and all(_SUBJECT_TOKEN.fullmatch(t) for t in subject.split("."))


class WebhookPublisher:
    """POSTs each event, signed, to a URL.

    Headers `event-id`, `event-type` and `event-key` carry the event; the type and key
    are percent-encoded UTF-8 (`header_value`; read them with `urllib.parse.unquote`),
    since HTTP headers are ASCII: a key like `commande-été` never reached a receiver.

    Args:
        url: The receiver's URL.
        secret: The secret shared with the receiver (`webhook_key`): a Standard
            Webhooks secret (`"whsec_..."`: the key in base64), other text (its UTF-8
            bytes are the key), or the key's bytes.
        timeout: Seconds to wait for an answer.
        clock: Seconds since the epoch, for the signature's timestamp.
    """

    def __init__(
        self,
        url: str,
        secret: bytes | str,
        *,
        timeout: float = 10.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        try:
            import httpx
        except ImportError as exc:
            raise MissingExtraError(
                "WebhookPublisher needs httpx: pip install 'langgraph-durable[webhook]'"
            ) from exc
        self.url = _checked_url(url, ("http", "https"), "WebhookPublisher")
        self._key = webhook_key(secret)
        self._clock = clock
        self._client = httpx.AsyncClient(timeout=timeout)

    async def publish(self, event: OutboxEvent) -> None:
        body = event.body()
        headers = {
            "content-type": "application/json",
            **_encoded_headers(event),
            **sign_webhook(self._key, event.event_id, int(self._clock()), body),
        }
        response = await self._client.post(self.url, content=body, headers=headers)
        response.raise_for_status()

    async def aclose(self) -> None:
        await self._client.aclose()


def publisher_for(url: str, *, target: str | None = None) -> Any:
    """The publisher a URL names (what `langgraph-durable outbox relay` uses).

    `amqp://` or `amqps://`: RabbitMQ (`target` is the routing key); `nats://` or `tls://`:
    NATS JetStream (`target` is the subject); `http://` or `https://`: a signed webhook,
    whose secret is read from the environment variable LANGGRAPH_DURABLE_WEBHOOK_SECRET:
    read as `webhook_key` reads text, as `verify_webhook` does: a Standard Webhooks
    secret (`whsec_` then the key in base64), or any other text, whose UTF-8 bytes are
    then the key.
    Without `target`, the event type is the routing key or subject.
    """
    scheme = url.split("://", 1)[0].lower() if "://" in url else ""
    if scheme in ("amqp", "amqps"):
        return RabbitMQPublisher(url, routing_key=target)
    if scheme in ("nats", "tls"):
        return NatsPublisher(url, subject=target)
    if scheme in ("http", "https"):
        secret = os.environ.get(WEBHOOK_SECRET_ENV)
        if not secret:
            raise ConfigurationError(
                f"A webhook needs a signing secret: set {WEBHOOK_SECRET_ENV} to the secret "
                "the receiver verifies with."
            )
        return WebhookPublisher(url, secret)
    raise ConfigurationError(
        f"Cannot tell the broker from the URL scheme {scheme or '(none)'!r}: use amqp://, "
        "nats:// or https://."
    )
