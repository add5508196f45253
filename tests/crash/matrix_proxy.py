"""Database faults on request: a TCP proxy that cuts its connections, a server that restarts.

The crash matrix gives a worker the address of a control port; when the worker reaches its
fault point it connects there, sends a command and waits for `ok`:

- `drop` (`Proxy`): the worker reaches PostgreSQL through this proxy, which shuts down both
  sides of every connection it carries (the worker sees its sessions die as after a
  network cut). New connections are forwarded as before, so a pool can reconnect.
  PostgreSQL on a Unix socket (the embedded server) is reached through that socket.
- `restart` (`Restarts`): a private embedded PostgreSQL is stopped and started again on
  the same data directory; what was committed stays, every session dies.
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from types import TracebackType

from langgraph_durable.embedded import EmbeddedPostgres, start_embedded_postgres

BUFFER = 65536


class ControlPort:
    """Answers `COMMAND` lines on 127.0.0.1: runs the command's action, then says `ok`."""

    def __init__(self, actions: dict[str, Callable[[], None]]) -> None:
        self.actions = actions
        self.server = socket.create_server(("127.0.0.1", 0))
        self.address = f"127.0.0.1:{self.server.getsockname()[1]}"
        self.lock = threading.Lock()  # one fault at a time
        threading.Thread(target=self.serve, daemon=True).start()

    def serve(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            with conn:
                action = self.actions.get(conn.makefile().readline().strip())
                if action is not None:
                    with self.lock:
                        action()
                    conn.sendall(b"ok\n")

    def close(self) -> None:
        self.server.close()


def ask(control: str, command: str) -> None:
    """Send `command` to a control port at "host:port"; returns once it was done."""
    host, port = control.rsplit(":", 1)
    with socket.create_connection((host, int(port))) as sock:
        sock.sendall(f"{command}\n".encode())
        if sock.makefile().readline().strip() != "ok":
            raise RuntimeError(f"the control port did not confirm {command!r}")


class Restarts:
    """A private embedded PostgreSQL that restarts on `restart` (`control`, "host:port")."""

    def __init__(self) -> None:
        # Not under a private folder: as root, pgserver opens up the parents of its data dir.
        self.folder = Path(tempfile.mkdtemp(prefix="langgraph-durable-pg-matrix-"))
        self.server: EmbeddedPostgres = start_embedded_postgres(self.folder / "pgdata")
        self.dsn = self.server.dsn
        self.port = ControlPort({"restart": self.restart})
        self.control = self.port.address
        self.restarts = 0

    def restart(self) -> None:
        self.server.stop()
        self.server = start_embedded_postgres(self.folder / "pgdata")
        self.restarts += 1

    def __enter__(self) -> Restarts:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.port.close()
        self.server.stop()
        shutil.rmtree(self.folder, ignore_errors=True)


class Proxy:
    """Forwards 127.0.0.1:`port` to the server; `control` is "host:port" of its control port."""

    def __init__(self, host: str, port: int) -> None:
        self.target = (host, port)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.lock = threading.Lock()
        self.carried: list[socket.socket] = []
        self.closed = False
        self.controller = ControlPort({"drop": self.drop})
        self.control = self.controller.address

    def __enter__(self) -> Proxy:
        threading.Thread(target=self.accept, daemon=True).start()
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
