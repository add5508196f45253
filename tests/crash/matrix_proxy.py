"""A TCP proxy in front of PostgreSQL that can cut every connection it carries, on request.

The crash matrix points a worker at the proxy; when the worker reaches its fault point it
connects to the control port and sends `drop`: the proxy shuts down both sides of every
connection it carries (the worker sees its sessions die as after a network cut) and
answers `ok`. New connections are forwarded as before, so a pool can reconnect.
PostgreSQL on a Unix socket (the embedded server) is reached through that socket.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from pathlib import Path
from types import TracebackType

BUFFER = 65536


class Proxy:
    """Forwards 127.0.0.1:`port` to the server; `control` is "host:port" of its control port."""

    def __init__(self, host: str, port: int) -> None:
        self.target = (host, port)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.controller = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.control = f"127.0.0.1:{self.controller.getsockname()[1]}"
        self.lock = threading.Lock()
        self.carried: list[socket.socket] = []
        self.closed = False

    def __enter__(self) -> Proxy:
        threading.Thread(target=self.accept, daemon=True).start()
        threading.Thread(target=self.serve_control, daemon=True).start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.closed = True
        self.drop()
        self.listener.close()
        self.controller.close()

    def upstream(self) -> socket.socket:
        host, port = self.target
        if host.startswith("/"):  # a Unix socket directory, as libpq spells it
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.connect(str(Path(host) / f".s.PGSQL.{port}"))
            return sock
        return socket.create_connection((host, port))

    def accept(self) -> None:
        while not self.closed:
            try:
                client, _ = self.listener.accept()
                server = self.upstream()
            except OSError:
                return
            with self.lock:
                self.carried += [client, server]
            for src, dst in ((client, server), (server, client)):
                threading.Thread(target=self.pipe, args=(src, dst), daemon=True).start()

    @staticmethod
    def pipe(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(BUFFER):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (src, dst):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)

    def drop(self) -> None:
        """Cut every connection carried so far."""
        with self.lock:
            carried, self.carried = self.carried, []
        for sock in carried:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def serve_control(self) -> None:
        while not self.closed:
            try:
                conn, _ = self.controller.accept()
            except OSError:
                return
            with conn:
                if conn.makefile().readline().strip() == "drop":
                    self.drop()
                    conn.sendall(b"ok\n")
