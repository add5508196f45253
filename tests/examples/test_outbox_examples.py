"""The outbox examples run as a user runs them and check their own claims (exit 0).

Each gets a fresh database; the RabbitMQ and NATS ones need those brokers (a failure in
CI, a skip elsewhere).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.mark.parametrize(
    ("name", "port"), [("outbox_webhook", None), ("outbox_rabbitmq", 5672), ("outbox_nats", 4222)]
)
def test_outbox_example(name: str, port: int | None, fresh_db_dsn: str) -> None:
    if port is not None:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=2).close()
        except OSError:
            if os.environ.get("CI") == "true":
                pytest.fail(f"nothing listens on 127.0.0.1:{port}, and CI needs the broker")
            pytest.skip(f"nothing listens on 127.0.0.1:{port}")
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
