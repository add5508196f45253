"""What the outbox's I/O shells share: the event a publisher sees, backoff, signatures
(Standard Webhooks), which publish failures spend an event's attempts.

Pure code, never generated; tested without a database or a broker.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import re
import socket
import sys
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from urllib.parse import quote

from langgraph_durable._ids import is_text
from langgraph_durable.errors import InvalidInputError, InvalidWebhookError

__all__ = [
    "BrokerUnreachableError",
    "OutboxEvent",
    "backoff_delay",
    "error_text",
    "event_id_of",
    "event_of",
    "header_value",
    "is_transport_error",
    "mask_urls",
    "sign_webhook",
    "verify_webhook",
    "webhook_key",
]


@dataclass(frozen=True)
class OutboxEvent:
    """An event as a relay hands it to a publisher.

    `event_id` is stable: it is the message id on every delivery, so consumers can drop
    redeliveries (`inbox_record_txn`).
    """

    event_id: str
    event_type: str
    key: str
    payload: Any
    seq: int
    attempts: int = 0
    thread_id: str | None = None
    task_id: str | None = None
    created_at: datetime | None = None
    headers: dict[str, str] = field(default_factory=dict)

    def body(self) -> bytes:
        """The message body: the payload as compact JSON."""
        return json.dumps(self.payload, separators=(",", ":"), ensure_ascii=False).encode()


def event_of(row: dict[str, Any]) -> OutboxEvent:
    """The event of an `outbox_claim` row."""
    return OutboxEvent(
        event_id=str(row["event_id"]),
        event_type=row["event_type"],
        key=row["key"],
        payload=row["payload"],
        seq=int(row["seq"]),
        attempts=int(row["attempts"]),
        thread_id=row["thread_id"],
        task_id=row["task_id"],
        created_at=row["created_at"],
    )


def backoff_delay(attempts: int, *, base: float = 1.0, cap: float = 300.0) -> float:
    """Seconds before the next try after `attempts` failed tries: base * 2^(n-1), capped."""
    if attempts < 1:
        return 0.0
    return float(min(cap, base * 2 ** min(attempts - 1, 30)))


class BrokerUnreachableError(ConnectionError):
    """A publisher could not connect to its broker: nothing of the event was sent.

    The publishers raise it (from the client's error) when connecting fails; a
    publisher of your own raises it, or `ConnectionRefusedError`, only when it knows
    nothing went out (`is_transport_error`).
    """


_CLIENT_TRANSPORT_ERRORS = (
    ("httpx", "ConnectError"),  # refused, a name that does not resolve, TLS handshake
    ("httpx", "ConnectTimeout"),
    ("httpx", "PoolTimeout"),  # no connection of the pool came free: nothing sent
    # The clients' refusals to send on a connection they know is gone:
    ("aiormq.exceptions", "ChannelInvalidStateError"),
    ("nats.errors", "NoServersError"),
    ("nats.errors", "ConnectionClosedError"),
    ("nats.errors", "ConnectionReconnectingError"),
    ("nats.errors", "ConnectionDrainingError"),
    ("nats.errors", "OutboundBufferLimitError"),
)
"""The broker clients' errors that prove nothing was sent, as (module, class)."""


def is_transport_error(error: BaseException) -> bool:
    """Whether a publish failed before anything of the event was sent, because the
    broker could not be reached: a refused connection, a name that does not resolve, a
    connect timeout, a client that refuses to send on a connection it knows is gone.

    Such a failure says nothing about the event, so it does not spend the event's
    attempts; the relay backs off as a whole instead. Counted, a broker outage longer
    than the backoff schedule (1 + 2 + ... + 256 s at the defaults, about 8.5 minutes)
    turned every waiting event dead, and the events queued behind a dead one went out
    before it, out of order.

    Everything else counts against the event, including failures that may follow
    sending: a read timeout, a connection dropped after the request (httpx's
    `RemoteProtocolError`, `ReadError`), the relay's `publish_timeout`, any other
    `OSError` (a callback's full disk, say). Counted as outages, one event whose own
    publish failed that way was retried forever and held every other key back. Errors
    about the message itself count too: the broker nacked or returned it, a webhook
    answered 4xx or 5xx, a payload too large.

    The clients' errors are looked up only in modules already imported: an error of a
    client never imported cannot occur.
    """
    if isinstance(error, (BrokerUnreachableError, ConnectionRefusedError, socket.gaierror)):
        return True
    for module_name, class_name in _CLIENT_TRANSPORT_ERRORS:
        found = getattr(sys.modules.get(module_name), class_name, None)
        if isinstance(found, type) and isinstance(error, found):
            return True
    return False


MAX_AGE_S = 1000 * 365.25 * 86400
"""The longest age the retention calls take: a cutoff Postgres computes from now."""


def age_seconds(older_than: object) -> float:
    """`older_than` as seconds for a retention call, or `InvalidInputError` naming it."""
    if isinstance(older_than, bool) or not isinstance(older_than, (int, float)):
        raise InvalidInputError(f"older_than={older_than!r}: pass a number of seconds.")
    if not 0 <= older_than <= MAX_AGE_S:  # NaN fails too
        raise InvalidInputError(
            f"older_than={older_than!r}: pass a number of seconds from 0 to 1,000 years."
        )
    return float(older_than)


MAX_ROWS = 2**63 - 1
"""Postgres' LIMIT is a bigint."""


def row_limit(limit: object) -> int:
    """`events(limit=...)`: a whole number from 1 to 2**63 - 1, or `InvalidInputError`
    naming it (a negative or non-numeric one was a raw psycopg error)."""
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_ROWS:
        raise InvalidInputError(
            f"limit={limit!r}: give the most events to list as a whole number >= 1."
        )
    return limit


def inbox_ids(consumer: object, message_id: object) -> tuple[str, str]:
    """An inbox row's consumer and message id as stored, or `InvalidInputError` naming
    what to change. Both must be non-empty text Postgres stores (no NUL, no lone
    surrogate: those were raw psycopg errors); a message id given as a `uuid.UUID` (an
    event id) is its text."""
    if isinstance(message_id, uuid.UUID):
        message_id = str(message_id)
    for name, value in (("consumer", consumer), ("message_id", message_id)):
        if not value or not is_text(value):
            raise InvalidInputError(
                f"inbox: {name}={value!r}; give a non-empty string without NUL or lone "
                "surrogates (a message id is the event id the message carries)."
            )
    return str(consumer), str(message_id)


def event_id_of(text: object, what: str = "event_id") -> str:
    """An event id as the outbox stores it (a UUID), or `InvalidInputError` naming it."""
    try:
        return str(uuid.UUID(str(text)))
    except ValueError:
        raise InvalidInputError(
            f"{what} {text!r}: give an event id as the outbox shows it (a UUID)"
        ) from None


_URL = re.compile(
    r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]{0,31}://)(?P<user>[^/?#\s'\"]{1,256}@)?"
    r"(?P<host>[^/?#\s'\"@]{1,256})(?P<rest>[/?#][^\s'\"]*)?"
)
"""A URL in an error's text: its user part (`user:password@`), its host, and the rest (a
path or query can hold a token too, as a Slack-style webhook URL does)."""

_ERROR_TEXT_MAX = 4000
"""Characters of an error's text kept (the outbox row keeps 2,000)."""

_ERROR_TEXT_LOOKED_AT = 4 * _ERROR_TEXT_MAX
"""Characters of an error's text looked at for URLs; the rest is never shown."""

_URL_ENDS = " \t\r\n'\""
"""Characters that end a URL in an error's text (as `_URL` reads it, among others)."""


_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
"""Characters a Postgres text value cannot hold: NUL, and lone surrogates (not UTF-8)."""


def error_text(error: BaseException) -> str:
    """`Type: message` of a publishing error, for the outbox row, the CLI and the logs,
    every URL in it cut to its scheme and host (`https://***@hooks.example/…`): client
    libraries quote the URL they failed on (httpx's `raise_for_status` does), and a
    webhook or broker URL may hold a password or a token.

    NUL and lone surrogates are dropped: a broker's message may quote binary data, and
    Postgres refuses both in text, so storing the error would fail the relay's round."""
    text = f"{type(error).__name__}: {error}"
    if len(text) > _ERROR_TEXT_LOOKED_AT:  # the mask's time stays bounded
        text = text[:_ERROR_TEXT_LOOKED_AT]
        start = max(text.rfind(c) for c in _URL_ENDS) + 1
        if "://" in text[start:]:
            text = text[:start]  # a URL cut short: its `user:password@` may be cut too
    # Masked before the last cut: a cut through a URL's `user:password@` hid the `@`
    # from the mask, and the password's start was stored and shown.
    return mask_urls(_UNSTORABLE.sub("", text))[:_ERROR_TEXT_MAX]


def mask_urls(text: str) -> str:
    """`text` with every URL in it cut to its scheme and host (`amqp://***@host/…`)."""
    return _URL.sub(_url_shown, text)


def _url_shown(found: re.Match[str]) -> str:
    user = "***@" if found.group("user") else ""
    rest = found.group("rest") or ""
    after = rest[len(rest.rstrip(".,;:!)]}>")) :]  # the sentence's, not the URL's
    return f"{found.group('scheme')}{user}{found.group('host')}{'/…' if rest else ''}{after}"


_HEADER_SAFE = "".join(chr(c) for c in range(0x21, 0x7F) if chr(c) != "%")
"""Characters a header value carries as they are: printable ASCII but space and `%`."""


def header_value(text: str) -> str:
    """`text` as an HTTP header value: UTF-8, percent-encoded (`urllib.parse.quote`), so
    that a receiver reads it back with `urllib.parse.unquote`.

    httpx sends header values as ASCII: an event whose key or type held any other
    character (a thread id `commande-été`, the key's default) failed every attempt and
    went dead. Printable ASCII other than space and `%` is unchanged, so most keys and
    types read as they did; a space is `%20` (HTTP drops a value's leading and trailing
    spaces), a `%` is `%25`, control characters are encoded too."""
    return quote(text, safe=_HEADER_SAFE)


SECRET_PREFIX = "whsec_"
"""How a Standard Webhooks secret is written: this prefix, then the key in base64."""


def webhook_key(secret: bytes | str) -> bytes:
    """The HMAC key of a webhook secret; the one rule of the relay, the CLI,
    `WebhookPublisher`, `sign_webhook` and `verify_webhook`.

    - Text starting `whsec_` is a Standard Webhooks secret: the key in base64 after the
      prefix (`whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw`), as Standard Webhooks'
      libraries read it;
    - any other text is the key as its UTF-8 bytes (`my-shared-secret`);
    - bytes are the key itself.

    Text without the prefix used to be read as base64 by the library and as UTF-8 by
    the CLI: one secret gave two keys, and every delivery failed its signature check.

    Raises:
        InvalidInputError: An empty secret, or a `whsec_` secret that is not base64.
    """
    if isinstance(secret, str):
        if secret.startswith(SECRET_PREFIX):
            try:
                key = base64.b64decode(secret.removeprefix(SECRET_PREFIX), validate=True)
            except (binascii.Error, ValueError):
                raise InvalidInputError(
                    "The webhook secret starts with 'whsec_' but what follows is not base64: "
                    "copy the whole secret as the receiver shows it (Standard Webhooks: "
                    "'whsec_' then the key in base64), or give a secret without the prefix "
                    "to use its UTF-8 bytes as the key."
                ) from None
        else:
            key = secret.encode()
    else:
        key = bytes(secret)
    if not key:
        raise InvalidInputError("A webhook secret must not be empty.")
    return key


def _signature(key: bytes, message_id: str, timestamp: int, body: bytes) -> str:
    signed = f"{message_id}.{timestamp}.".encode() + body
    return "v1," + base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()


def sign_webhook(
    secret: bytes | str, message_id: str, timestamp: int, body: bytes
) -> dict[str, str]:
    """Headers of a webhook signed as Standard Webhooks specifies, so that a receiver's
    Standard Webhooks library (or `verify_webhook`) accepts it.

    `webhook-signature` is `v1,` and the base64 of HMAC-SHA256 over
    `{webhook-id}.{webhook-timestamp}.{body}`, keyed by `webhook_key(secret)`: a receiver
    checks that the body came from the holder of the secret, and rejects old timestamps
    and repeated ids.
    """
    return {
        "webhook-id": message_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": _signature(webhook_key(secret), message_id, timestamp, body),
    }


_TIMESTAMP = re.compile(r"-?[0-9]{1,15}")
"""A `webhook-timestamp`: whole seconds since the epoch."""


def verify_webhook(
    secret: bytes | str,
    headers: Any,
    body: bytes,
    *,
    now: float,
    tolerance: float = 300.0,
) -> str:
    """Check a signed webhook; returns its message id, or raises `InvalidWebhookError` (a
    `ValueError`) saying why: refuse the delivery then.

    Args:
        secret: The secret shared with the sender (`webhook_key`): `whsec_` and the
            key in base64 (Standard Webhooks), other text (its UTF-8 bytes are the
            key), or the key's bytes.
        headers: The request's headers (any mapping with `get`, case as sent).
        body: The raw request body, exactly as received.
        now: The receiver's time in seconds since the epoch (`time.time()`).
        tolerance: Seconds a timestamp may be away from `now`; older ones are replays.
    """
    message_id = headers.get("webhook-id")
    timestamp = headers.get("webhook-timestamp")
    signature = headers.get("webhook-signature")
    if not message_id or not timestamp or not signature:
        raise InvalidWebhookError(
            "missing webhook-id, webhook-timestamp or webhook-signature header"
        )
    # ASCII digits, at most 15 (a float holds them exactly): int() also took 400 digits,
    # whose distance from `now` raised OverflowError, and non-ASCII digits.
    if not isinstance(timestamp, str) or not _TIMESTAMP.fullmatch(timestamp):
        raise InvalidWebhookError("webhook-timestamp is not a whole number of seconds")
    sent = int(timestamp)
    if abs(now - sent) > tolerance:
        raise InvalidWebhookError(
            "webhook-timestamp is outside the tolerance: a replay or a wrong clock"
        )
    expected = _signature(webhook_key(secret), message_id, sent, body)
    # Space-separated `v1,<base64>` signatures (several while a secret is rotated).
    expected_bytes = expected.encode()
    if not any(
        hmac.compare_digest(expected_bytes, given.encode("utf-8", "replace"))
        for given in signature.split(" ")
    ):
        raise InvalidWebhookError("webhook-signature does not match the body")
    return str(message_id)
