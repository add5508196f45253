"""A consumer for outbox tests: its work and its inbox row commit in one transaction.

`WebhookReceiver` is a real HTTP server on 127.0.0.1 that checks each delivery's HMAC
signature (`verify_webhook`, or `standard_webhooks_verify`) and consumes it through the
inbox, so a redelivery is answered but does nothing.

`need_broker` skips a test (fails it in CI) when a broker it needs does not listen.

`standard_webhooks_signature` and `standard_webhooks_verify` are written here from the
Standard Webhooks specification alone, independent of the package, so that a test can
show that what the package sends is what a receiver following the specification accepts.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import socket
import threading
import time
from collections.abc import Callable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import psycopg
import pytest

from langgraph_durable.outbox import inbox_record_txn, verify_webhook


def need_broker(name: str, port: int) -> None:
    """Fail in CI, skip elsewhere, when nothing listens on the broker's port."""
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
    except OSError:
        if os.environ.get("CI") == "true":
            pytest.fail(f"{name} is not reachable on 127.0.0.1:{port}, and CI needs it")
        pytest.skip(f"{name} is not running on 127.0.0.1:{port}")


def consume(dsn: str, message_id: str, body: bytes) -> bool:
    """A consumer's work and its inbox row, in one transaction; False for a redelivery."""
    with psycopg.connect(dsn) as conn, conn.transaction():
        if not inbox_record_txn(conn, "test-consumer", message_id):
            return False
        conn.execute(
            "INSERT INTO consumer_work (message_id, body) VALUES (%s, %s)",
            (message_id, body.decode()),
        )
        return True


def work_done(dsn: str) -> list[str]:
    with psycopg.connect(dsn) as conn:
        return [r[0] for r in conn.execute("SELECT message_id FROM consumer_work").fetchall()]


def standard_webhooks_signature(secret: str, msg_id: str, timestamp: str, body: bytes) -> str:
    """The specification's v1 signature: the secret is `whsec_` and the key in base64; the
    signature is `v1,` and the base64 of HMAC-SHA256 over `{msg_id}.{timestamp}.{body}`."""
    key = base64.b64decode(secret.split("_", 1)[1] if secret.startswith("whsec_") else secret)
    content = msg_id.encode() + b"." + timestamp.encode() + b"." + body
    return "v1," + base64.b64encode(hmac.new(key, content, hashlib.sha256).digest()).decode()


def standard_webhooks_verify(
    secret: str, headers: Mapping[str, str], body: bytes, *, now: float
) -> str:
    """A receiver's check as the specification describes it; the message id, or
    ValueError. The header holds space-delimited `version,signature` pairs; only v1
    counts; the timestamp must be within five minutes of `now`."""
    msg_id, timestamp = headers["webhook-id"], headers["webhook-timestamp"]
    if abs(now - int(timestamp)) > 5 * 60:
        raise ValueError("timestamp too old or too new")
    expected = standard_webhooks_signature(secret, msg_id, timestamp, body).split(",", 1)[1]
    for versioned in headers["webhook-signature"].split(" "):
        version, _, signature = versioned.partition(",")
        if version == "v1" and hmac.compare_digest(
            base64.b64decode(signature), base64.b64decode(expected)
        ):
            return msg_id
    raise ValueError("no matching signature")


Verify = Callable[[Any, Any, bytes], str]
"""(secret, headers, body) -> message id, or ValueError."""


class WebhookReceiver:
    """A real HTTP receiver that checks signatures and consumes through the inbox."""

    def __init__(
        self,
        dsn: str,
        secret: bytes | str,
        port: int = 0,
        verify: Verify = lambda secret, headers, body: verify_webhook(
            secret, headers, body, now=time.time()
        ),
        hang_up_on: Callable[[bytes], bool] = lambda body: False,
    ) -> None:
        """`hang_up_on(body)`: read such a delivery, then close the connection without
        an answer (a receiver that crashes on that payload)."""
        self.deliveries: list[str] = []
        self.headers: list[dict[str, str]] = []
        """Each accepted delivery's headers, as received."""
        self.changed = threading.Condition()
        self.rejected = 0
        self.hung_up = 0
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                del format, args

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["content-length"]))
                if hang_up_on(body):
                    receiver.hung_up += 1
                    self.close_connection = True
                    return
                try:
                    message_id = verify(secret, self.headers, body)
                except ValueError:
                    receiver.rejected += 1
                    self.send_response(401)
                    self.end_headers()
                    return
                consume(dsn, message_id, body)
                with receiver.changed:
                    receiver.deliveries.append(message_id)
                    receiver.headers.append(dict(self.headers.items()))
                    receiver.changed.notify_all()
                self.send_response(204)
                self.end_headers()

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def wait_for(self, count: int) -> list[str]:
        """Block until `count` deliveries have arrived (the test's timeout bounds it)."""
        with self.changed:
            self.changed.wait_for(lambda: len(self.deliveries) >= count)
            return list(self.deliveries)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
