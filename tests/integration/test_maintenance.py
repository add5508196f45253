"""Retention, the operator CLI and the async-commit option on a real database."""

from __future__ import annotations

import json
import uuid
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from _pg import thread_rows
from langgraph.checkpoint.base import empty_checkpoint

from langgraph_durable import DurablePostgresSaver, InvalidInputError
from langgraph_durable.cli import main as cli


def put_at(saver: DurablePostgresSaver, thread: str, ts: datetime) -> Any:
    checkpoint = empty_checkpoint()
    checkpoint["ts"] = ts.isoformat()
    checkpoint["channel_values"] = {"big": {"payload": list(range(5))}}
    checkpoint["channel_versions"] = {"big": "1"}
    config = saver.put(
        {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}, checkpoint, {}, {"big": "1"}
    )
    saver.put_writes(config, [("ch", "v")], "task")
    return config


def test_delete_idle_threads_removes_only_idle_ones(db_dsn: str) -> None:
    now = datetime.now(timezone.utc)
    old, fresh = f"old-{uuid.uuid4()}", f"fresh-{uuid.uuid4()}"
    with DurablePostgresSaver.from_conn_string(db_dsn) as saver:
        saver.setup()
        put_at(saver, old, now - timedelta(days=40))
        put_at(saver, fresh, now - timedelta(days=40))
        put_at(saver, fresh, now - timedelta(hours=1))
        deleted = saver.delete_idle_threads(timedelta(days=30))
        assert old in deleted
        assert fresh not in deleted
        assert saver.get_tuple({"configurable": {"thread_id": old}}) is None
        assert saver.get_tuple({"configurable": {"thread_id": fresh}}) is not None
        left = thread_rows(db_dsn, old)
        assert left["checkpoint_blobs"] == left["checkpoint_writes"] == 0
        # An age reaching back before the year 1: no thread is that old.
        assert saver.delete_idle_threads(timedelta(days=800_000)) == []
        with pytest.raises(InvalidInputError, match="positive timedelta"):
            saver.delete_idle_threads(30)  # type: ignore[arg-type]


def test_async_commit_saver_round_trips(db_dsn: str) -> None:
    thread = f"ac-{uuid.uuid4()}"
    with DurablePostgresSaver.from_conn_string(db_dsn, async_commit=True) as saver:
        saver.setup()
        config = put_at(saver, thread, datetime.now(timezone.utc))
        found = saver.get_tuple(config)
    assert found is not None
    assert found.checkpoint["channel_values"]["big"] == {"payload": [0, 1, 2, 3, 4]}
    assert found.pending_writes == [("task", "ch", "v")]


def test_cli_setup_check_prune_and_idle(
    fresh_db_dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli(["--dsn", fresh_db_dsn, "--json", "setup"]) == 0
    assert json.loads(capsys.readouterr().out)["applied"]  # a fresh database: every step
    assert cli(["--dsn", fresh_db_dsn, "--json", "setup"]) == 0
    assert json.loads(capsys.readouterr().out) == {"applied": []}
    assert cli(["--dsn", fresh_db_dsn, "check"]) == 0
    assert "schema: ok" in capsys.readouterr().out
    thread = f"cli-{uuid.uuid4()}"
    with DurablePostgresSaver.from_conn_string(fresh_db_dsn) as saver:
        first = put_at(saver, thread, datetime.now(timezone.utc) - timedelta(days=9))
        second_cp = empty_checkpoint()
        saver.put(first, second_cp, {}, {})
    assert cli(["--dsn", fresh_db_dsn, "--json", "prune", thread]) == 0
    with DurablePostgresSaver.from_conn_string(fresh_db_dsn) as saver:
        assert len(list(saver.list({"configurable": {"thread_id": thread}}))) == 1
    capsys.readouterr()
    assert cli(["--dsn", fresh_db_dsn, "--json", "delete-idle", "--older-than", "100w"]) == 0
    assert json.loads(capsys.readouterr().out) == {"deleted": []}


def test_cli_errors_are_one_line_with_the_fix(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli(["--dsn", "postgresql://postgres@127.0.0.1:1/x", "check"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: Could not connect to Postgres at 127.0.0.1:1/x")
    with pytest.raises(SystemExit) as exit_info:
        cli(["delete-idle", "--older-than", "soon"])
    assert exit_info.value.code == 2


def test_cli_schema_prints_sql(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli(["schema"]) == 0
    assert "CREATE TABLE checkpoints" in capsys.readouterr().out


def test_cli_lists_and_resolves_unknown_effects(
    db_dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    import psycopg

    key = f"cli-effect-{uuid.uuid4()}"
    with psycopg.connect(db_dsn, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO langgraph_durable_effects (key, effect_name, input_hash, status, "
            "thread_id) VALUES (%s, 'charge', 'h', 'unknown', 'cli-thread')",
            (key,),
        )
    assert cli(["--dsn", db_dsn, "effects", "--thread", "cli-thread"]) == 0
    assert key in capsys.readouterr().out
    assert cli(["--dsn", db_dsn, "resolve", key, "--completed", '{"receipt": 7}']) == 0
    assert cli(["--dsn", db_dsn, "--json", "effects", "--thread", "cli-thread"]) == 0
    assert json.loads(capsys.readouterr().out.splitlines()[-1]) == {"effects": []}
    assert cli(["--dsn", db_dsn, "resolve", key, "--allow-retry"]) == 1
    assert "completed, not unknown" in capsys.readouterr().err
