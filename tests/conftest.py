"""Session-wide Postgres fixtures; the helpers live in ``tests/_pg.py``."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from _pg import ServerUnavailableError, create_database, discover_server, drop_database
from hypothesis import HealthCheck, settings

from langgraph_durable import DurablePostgresSaver, RunRegistry

# Property tests (hypothesis). "suite" is the default: derandomized (the same examples on
# every run and machine, so CI is reproducible), no example database, few examples so the
# whole suite stays fast. "long" runs many more and random ones: set
# LANGGRAPH_DURABLE_HYPOTHESIS=long, or pass `--hypothesis-profile long` to pytest.
# Each test's own `max_examples` is scaled by `examples()` in `tests/_props.py`.
_COMMON = {
    "deadline": None,  # real Postgres: a slow fsync is not a failure
    "suppress_health_check": [HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
}
settings.register_profile("suite", derandomize=True, database=None, print_blob=True, **_COMMON)
settings.register_profile("long", derandomize=False, database=None, print_blob=True, **_COMMON)
settings.load_profile(os.environ.get("LANGGRAPH_DURABLE_HYPOTHESIS", "suite"))


@pytest.fixture(scope="session")
def pg_server_dsn() -> Iterator[str]:
    """DSN of a maintenance database on the test server (env, local probe or embedded)."""
    failure = ""
    try:
        server = discover_server()
    except ServerUnavailableError as exc:
        failure = str(exc)
    if failure:  # outside the except block, so the report is one clean line
        pytest.fail(failure, pytrace=False)
    try:
        yield server.dsn
    finally:
        server.close()


@pytest.fixture(scope="session")
def db_dsn(pg_server_dsn: str) -> Iterator[str]:
    """DSN of a database shared by the whole session, dropped at the end."""
    name, dsn = create_database(pg_server_dsn)
    try:
        yield dsn
    finally:
        drop_database(pg_server_dsn, name)


@pytest.fixture
def fresh_db_dsn(pg_server_dsn: str) -> Iterator[str]:
    """DSN of a brand new, empty database for one test, dropped afterwards."""
    name, dsn = create_database(pg_server_dsn)
    try:
        yield dsn
    finally:
        drop_database(pg_server_dsn, name)


@pytest.fixture(scope="module")
def saver(db_dsn: str) -> Iterator[DurablePostgresSaver]:
    """A sync saver on the session's database, set up; one per test module."""
    with DurablePostgresSaver.from_conn_string(db_dsn) as found:
        found.setup()
        yield found


@pytest.fixture
def runs(saver: DurablePostgresSaver) -> RunRegistry:
    """The run registry of the module's saver."""
    return RunRegistry(saver)
