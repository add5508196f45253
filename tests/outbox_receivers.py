"""A consumer for outbox tests: its work and its inbox row commit in one transaction.

`WebhookReceiver` is a real HTTP server on 127.0.0.1 that checks each delivery's HMAC
signature (`verify_webhook`) and consumes it through the inbox, so a redelivery is
answered but does nothing.
"""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import psycopg

from langgraph_durable.outbox import inbox_record_txn, verify_webhook


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


class WebhookReceiver:
    """A real HTTP receiver that checks signatures and consumes through the inbox."""

    def __init__(self, dsn: str, secret: bytes, port: int = 0) -> None:
        self.deliveries: list[str] = []
        self.changed = threading.Condition()
        self.rejected = 0
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                del format, args

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["content-length"]))
                try:
                    message_id = verify_webhook(secret, self.headers, body, now=time.time())
                except ValueError:
                    receiver.rejected += 1
                    self.send_response(401)
                    self.end_headers()
                    return
                consume(dsn, message_id, body)
                with receiver.changed:
                    receiver.deliveries.append(message_id)
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
