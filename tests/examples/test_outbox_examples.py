"""The outbox examples run as a user runs them and check their own claims (exit 0).

Each gets a fresh database; the RabbitMQ and NATS ones need those brokers (a failure in
CI, a skip elsewhere).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from outbox_receivers import need_broker

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.mark.parametrize(
    ("name", "port"), [("outbox_webhook", None), ("outbox_rabbitmq", 5672), ("outbox_nats", 4222)]
)
def test_outbox_example(name: str, port: int | None, fresh_db_dsn: str) -> None:
    if port is not None:
        need_broker({5672: "RabbitMQ", 4222: "NATS"}[port], port)
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / f"{name}.py")],
        env={**os.environ, "LANGGRAPH_DURABLE_DSN": fresh_db_dsn},
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "acted [True, True, False]" in done.stdout
