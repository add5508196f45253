"""Real HTTP receivers for effect tests: they act, and then fail the way networks do.

A receiver is a threaded HTTP server on 127.0.0.1. `POST /act` with a JSON body
`{"key": ..., "data": ...}` performs the action (appends it to `acted`); what happens next
is the receiver's `mode`:

- `"ok"`: answers 200 with `{"id": n}`;
- `"hang"`: acts, then holds the response until `release()`; the client times out
  (`TimeoutError`) although the action happened;
- `"drop"`: acts, then closes the connection without answering (`ConnectionResetError`
  or `http.client.RemoteDisconnected`, a `ConnectionError`);
- `"refuse"` is not a mode: `closed_port()` gives a port nobody listens on
  (`ConnectionRefusedError`: nothing was sent).

`script` gives the modes of the next requests, one each, before `mode` applies again.

`honours_keys=True` makes the receiver act once per key (like Stripe's Idempotency-Key): a
repeated key returns the first answer without acting again. `GET /acted?key=K` tells
whether key K acted, for reconcile hooks.
"""

from __future__ import annotations

import http.client
import json
import socket
import threading
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal
from urllib.parse import parse_qs, urlparse

Mode = Literal["ok", "hang", "drop"]


class Receiver:
    """A real receiver on a local port; see the module docstring."""

    def __init__(self, *, honours_keys: bool = False) -> None:
        self.honours_keys = honours_keys
        self.mode: Mode = "ok"
        self.script: list[Mode] = []
        """Modes for the next requests, one each; then `mode`."""
        self.acted: list[dict[str, Any]] = []
        self._answers: dict[str, int] = {}
        self._lock = threading.Lock()
        self._released = threading.Event()
        self.requests = 0
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:  # quiet
                del format, args

            def do_GET(self) -> None:
                query = parse_qs(urlparse(self.path).query)
                key = query.get("key", [""])[0]
                with receiver._lock:
                    found = [a for a in receiver.acted if a["key"] == key]
                receiver._answer(
                    self, {"acted": bool(found), "id": found[0]["id"] if found else None}
                )

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with receiver._lock:
                    receiver.requests += 1
                    key = body["key"]
                    if receiver.honours_keys and key in receiver._answers:
                        answer = receiver._answers[key]
                    else:
                        answer = len(receiver.acted) + 1
                        receiver.acted.append({"key": key, "data": body.get("data"), "id": answer})
                        receiver._answers[key] = answer
                    mode = receiver.script.pop(0) if receiver.script else receiver.mode
                if mode == "drop":
                    # Acted; now the connection goes away without an answer.
                    self.connection.shutdown(socket.SHUT_RDWR)
                    self.close_connection = True
                    return
                if mode == "hang":
                    receiver._released.wait(60)
                receiver._answer(self, {"id": answer})

        class Server(ThreadingHTTPServer):
            def handle_error(self, request: Any, client_address: Any) -> None:
                del request, client_address  # a client that timed out: expected here

        self._server = Server(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    @staticmethod
    def _answer(handler: BaseHTTPRequestHandler, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        handler.wfile.write(data)

    def release(self) -> None:
        """Let hanging responses go (their clients have long timed out)."""
        self._released.set()

    def close(self) -> None:
        self.release()
        self._server.shutdown()
        self._server.server_close()

    def count(self, key: str | None = None) -> int:
        """How many times the receiver acted (for one key, or in all)."""
        with self._lock:
            return len([a for a in self.acted if key is None or a["key"] == key])


def post(url: str, key: str, data: Any = None, *, timeout: float = 0.5) -> int:
    """The client side: POST /act and return the receiver's id for the action.

    Plain `http.client`, so errors arrive as the standard library raises them: a refused
    connection as `ConnectionRefusedError`, a response that never comes as `TimeoutError`,
    a dropped connection as `RemoteDisconnected` (a `ConnectionResetError`).
    """
    parsed = urlparse(url)
    conn = http.client.HTTPConnection(parsed.hostname or "", parsed.port, timeout=timeout)
    try:
        body = json.dumps({"key": key, "data": data})
        conn.request("POST", "/act", body=body, headers={"Content-Type": "application/json"})
        return int(json.loads(conn.getresponse().read())["id"])
    finally:
        conn.close()


def acted(url: str, key: str) -> int | None:
    """The id of the action under `key`, or None: what a reconcile hook asks."""
    with urllib.request.urlopen(f"{url}/acted?key={key}", timeout=5) as response:
        found = json.loads(response.read())
    return int(found["id"]) if found["acted"] else None


def closed_port() -> str:
    """A URL on a local port where nothing listens: connections are refused."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}"


@contextmanager
def receiver(*, honours_keys: bool = False) -> Iterator[Receiver]:
    found = Receiver(honours_keys=honours_keys)
    try:
        yield found
    finally:
        found.close()
