"""Fixtures for the console tests: a Northwind world in a fresh database, and clients."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from types import ModuleType

import pytest
import uvicorn
from console_host import host_app, northwind
from console_world import client_for
from starlette.testclient import TestClient

from langgraph_durable import DurablePostgresSaver


@pytest.fixture(scope="session")
def example() -> ModuleType:
    return northwind()


@pytest.fixture
def world(fresh_db_dsn: str, example: ModuleType) -> str:
    """A fresh database with the schema and the Northwind order 8890 ($420, not refunded)."""
    with DurablePostgresSaver.from_conn_string(fresh_db_dsn) as saver:
        saver.setup()
    example.reset_world(fresh_db_dsn)
    return fresh_db_dsn


@pytest.fixture
def ana(world: str) -> Iterator[TestClient]:
    """manager-ana, who may approve refunds up to $1000."""
    yield from client_for(world, "manager-ana")


@pytest.fixture
def console(world: str) -> Iterator[str]:
    """The host app (sign-in and the console at /console) on uvicorn, on a free port."""
    started = threading.Event()
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    port = sock.getsockname()[1]
    server = uvicorn.Server(
        uvicorn.Config(host_app(world, started=started), log_level="warning", lifespan="on")
    )
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not started.wait(0.5):  # the app's start-up event, or the server died
        assert thread.is_alive(), "the console did not start"
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join()
        sock.close()
