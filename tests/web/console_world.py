"""Helpers of the console tests: clients of the host app, Northwind threads and runs."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from types import ModuleType
from typing import Any

from console_host import USER_COOKIE, host_app
from psycopg.rows import dict_row
from starlette.testclient import TestClient

from langgraph_durable import DurablePostgresSaver, GraphVersion, RunRegistry, Worker
from langgraph_durable._sql import QUERIES
from langgraph_durable.web._views import questions_by_token


def client_for(dsn: str, user: str | None = None, **options: Any) -> Iterator[TestClient]:
    with TestClient(host_app(dsn, **options), follow_redirects=False) as client:
        if user is not None:
            client.cookies.set(USER_COOKIE, user)
        yield client


def start_plain(dsn: str, example: ModuleType) -> str:
    """A thread run by plain invoke, waiting for the manager's approval of $420."""
    thread = f"northwind-{uuid.uuid4().hex[:8]}"
    with DurablePostgresSaver.from_conn_string(dsn) as saver:
        graph = example.build(dsn).compile(checkpointer=saver)
        graph.invoke(
            {"thread": thread, "order_id": "8890", "amount": 420, "log": []},
            {"configurable": {"thread_id": thread}},
        )
    return thread


def start_run(dsn: str, example: ModuleType) -> tuple[str, str]:
    """A registry run that a worker took to the approval; (run id, thread id)."""
    thread = f"northwind-{uuid.uuid4().hex[:8]}"
    with DurablePostgresSaver.from_conn_string(dsn) as saver:
        version = GraphVersion("northwind", "1", example.build(dsn).compile(checkpointer=saver))
        run = RunRegistry(saver).create(
            version,
            {"thread": thread, "order_id": "8890", "amount": 420, "log": []},
            thread_id=thread,
        )
        Worker(saver, [version]).run_until_idle()
    return run.run_id, thread


def work(dsn: str, example: ModuleType) -> None:
    """Run every queued Northwind run now, in this process."""
    with DurablePostgresSaver.from_conn_string(dsn) as saver:
        version = GraphVersion("northwind", "1", example.build(dsn).compile(checkpointer=saver))
        Worker(saver, [version]).run_until_idle()


def form_fields(html: str) -> dict[str, str]:
    """The hidden fields of the first answer form on a page."""
    found = dict(re.findall(r'<input type="hidden" name="(\w+)" value="([^"]*)"', html))
    assert "csrf_token" in found, html
    return found


def csrf_of(html: str) -> str:
    """The CSRF token every console page carries for its session."""
    found = re.search(r'<meta name="csrf-token" content="([^"]+)">', html)
    assert found, html
    return found.group(1)


def tokens_of(dsn: str, thread: str) -> list[str]:
    """The question tokens of what a thread waits on, as the console makes them from the
    stored rows, for a form posted by hand (a page that shows no form for it)."""
    with DurablePostgresSaver.from_conn_string(dsn) as saver, saver.conn.connection() as conn:
        cur = conn.cursor(row_factory=dict_row)
        rows = cur.execute(
            QUERIES["pending_interrupts_thread"], {"thread_id": thread, "limit": 100}
        ).fetchall()
        return list(questions_by_token(saver.serde, rows))
