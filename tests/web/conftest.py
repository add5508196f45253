"""Fixtures for the console tests: a Northwind world in a fresh database, and clients."""

from __future__ import annotations

from collections.abc import Iterator
from types import ModuleType

import pytest
from console_host import northwind
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
