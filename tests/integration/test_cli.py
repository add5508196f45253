"""The CLI as scripts and people use it: real commands on a real database.

Options go before or after the subcommand, `--json` has a stable shape with numbers as
numbers, exit codes mean 0 done / 1 failed / 2 wrong command line, and no error ever shows a
password.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import uuid
from datetime import datetime
from pathlib import Path
from typing import Any

import psycopg
import pytest
from graphs import linear_graph
from langgraph.checkpoint.base import empty_checkpoint

from langgraph_durable import DurablePostgresSaver
from langgraph_durable import __name__ as package_name
from langgraph_durable.cli import _parser, main
from langgraph_durable.cli._commands import PRUNE_BATCH, PRUNE_DELETE_MAX
from langgraph_durable.cli._output import as_json

SECRET = "s3cret-pw-123"


@pytest.fixture
def dsn(fresh_db_dsn: str) -> str:
    assert main(["--dsn", fresh_db_dsn, "setup"]) == 0
    return fresh_db_dsn


def run_json(capsys: pytest.CaptureFixture[str], argv: list[str]) -> Any:
    capsys.readouterr()
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


def a_thread(dsn: str) -> str:
    thread = f"cli-{uuid.uuid4()}"
    with DurablePostgresSaver.from_conn_string(dsn) as saver:
        linear_graph(("a", "b")).compile(checkpointer=saver).invoke(
            {"log": []}, {"configurable": {"thread_id": thread}}, durability="sync"
        )
    return thread


@pytest.mark.parametrize(
    "order",
    [
        ["--dsn", "{dsn}", "--json", "check"],
        ["check", "--dsn", "{dsn}", "--json"],
        ["--json", "check", "--dsn", "{dsn}"],
        ["--dsn", "{dsn}", "check", "--json"],
    ],
    ids=["before", "after", "json-before", "dsn-before"],
)
def test_dsn_and_json_go_before_or_after_the_subcommand(
    dsn: str, capsys: pytest.CaptureFixture[str], order: list[str]
) -> None:
    argv = [part.replace("{dsn}", dsn) for part in order]
    assert run_json(capsys, argv) == {"schema": "ok"}


def test_the_dsn_falls_back_to_the_environment(
    dsn: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LANGGRAPH_DURABLE_DSN", dsn)
    assert run_json(capsys, ["check", "--json"]) == {"schema": "ok"}


def test_effects_json_keeps_numbers_numbers_and_times_iso(
    dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    key = f"cli-effect-{uuid.uuid4()}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO langgraph_durable_effects (key, effect_name, input_hash, status, "
            "attempt, thread_id, node, step) VALUES (%s, 'mail', 'h', 'unknown', 2, 't', 'n', 7)",
            (key,),
        )
    (row,) = run_json(capsys, ["effects", "--json", "--dsn", dsn])["effects"]
    assert row["key"] == key
    assert row["attempt"] == 2
    assert row["step"] == 7
    assert row["lease_expires_at"] is None
    assert datetime.fromisoformat(row["updated_at"]).tzinfo is not None
    assert set(row) >= {"status", "effect_name", "error_type", "thread_id", "node"}


def test_approvals_json_gives_ages_in_seconds(dsn: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert run_json(capsys, ["approvals", "--json", "--dsn", dsn]) == {"approvals": []}


def test_prune_of_an_unknown_thread_says_so_and_fails(
    dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    known = a_thread(dsn)
    capsys.readouterr()
    assert main(["prune", known, "no-such-thread", "--dsn", dsn]) == 1
    err = capsys.readouterr().err
    assert "'no-such-thread'" in err
    assert "nothing was pruned" in err
    assert run_json(capsys, ["prune", known, "--json", "--dsn", dsn]) == {
        "pruned": [known],
        "strategy": "keep_latest",
    }


def test_prune_needs_none_of_the_application_s_classes(
    dsn: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The CLI imports none of the application's modules, and the safe loader refuses a
    stored value of a class it has not imported: prune checked that each thread exists by
    reading its checkpoint, values and all, and failed on every such thread."""
    module = f"lgd_cli_app_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{module}.py").write_text(
        "from dataclasses import dataclass\n\n@dataclass\nclass Customer:\n    name: str\n"
    )
    sys.path.insert(0, str(tmp_path))
    try:
        customer = __import__(module).Customer("ana")
        thread = f"cli-app-{uuid.uuid4().hex[:8]}"
        with DurablePostgresSaver.from_conn_string(dsn) as saver:
            checkpoint = empty_checkpoint()
            checkpoint["channel_values"] = {"customer": customer}
            checkpoint["channel_versions"] = {"customer": saver.get_next_version(None, None)}
            config: Any = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
            versions = checkpoint["channel_versions"]
            saver.put(config, checkpoint, {"source": "loop", "step": 1}, versions)
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop(module, None)  # as in the CLI's own process: never imported
    assert run_json(capsys, ["prune", thread, "--json", "--dsn", dsn]) == {
        "pruned": [thread],
        "strategy": "keep_latest",
    }


def empty_threads(dsn: str, count: int) -> list[str]:
    """`count` threads of one empty checkpoint each."""
    threads = [f"cli-del-{i:02}-{uuid.uuid4().hex[:6]}" for i in range(count)]
    with DurablePostgresSaver.from_conn_string(dsn) as saver:
        for thread in threads:
            config: Any = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
            saver.put(config, empty_checkpoint(), {"source": "loop", "step": 0}, {})
    return threads


def test_prune_delete_deletes_every_thread_or_none(
    dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """More threads than one batch, the last one busy (an effect whose outcome is open):
    the command said "Nothing was deleted" after the earlier batches had been deleted.
    The refusal names the busy thread, and no innocent one with an empty reason."""
    threads = empty_threads(dsn, PRUNE_BATCH + 1)
    busy = threads[-1]
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO langgraph_durable_effects (key, effect_name, input_hash, status, "
            "thread_id) VALUES ('cli-open-charge', 'charge', 'h', 'unknown', %s)",
            (busy,),
        )
    capsys.readouterr()
    assert main(["prune", *threads, "--strategy", "delete", "--dsn", dsn]) == 1
    err = capsys.readouterr().err
    assert "Nothing was deleted" in err
    assert f"thread {busy!r}: effects with an open outcome cli-open-charge" in err
    assert not any(t in err for t in threads[:-1])  # no innocent thread, with no reason
    with psycopg.connect(dsn) as conn:
        left = conn.execute(
            "SELECT count(DISTINCT thread_id) FROM checkpoints WHERE thread_id = ANY(%s)",
            (threads,),
        ).fetchone()
    assert left == (len(threads),)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("DELETE FROM langgraph_durable_effects WHERE key = 'cli-open-charge'")
    deleted = run_json(capsys, ["prune", *threads, "--strategy", "delete", "--json", "--dsn", dsn])
    assert deleted == {"pruned": threads, "strategy": "delete"}
    with psycopg.connect(dsn) as conn:
        left = conn.execute(
            "SELECT count(*) FROM checkpoints WHERE thread_id = ANY(%s)", (threads,)
        ).fetchone()
    assert left == (0,)
    # All or none is one transaction locking each thread: a list that would exhaust the
    # server's lock table (16,000 threads did) is refused before anything is read.
    many = [f"t-{n}" for n in range(PRUNE_DELETE_MAX + 1)]
    assert main(["prune", *many, "--strategy", "delete", "--dsn", dsn]) == 1
    assert f"at most {PRUNE_DELETE_MAX:,} threads" in capsys.readouterr().err


def test_threads_history_hides_an_effects_password(
    dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """`effects show` hid it; `threads history --json` printed the stored error as is."""
    (thread,) = empty_threads(dsn, 1)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO langgraph_durable_effects (key, effect_name, input_hash, status, "
            "thread_id, error_message) VALUES (%s, 'charge', 'h', 'failed', %s, %s)",
            (f"cli-leak-{thread}", thread, "could not reach postgresql://app:TopSecretPw@db/x"),
        )
    for argv in (["--json"], []):
        capsys.readouterr()
        assert main(["threads", "history", thread, *argv, "--dsn", dsn]) == 0
        assert "TopSecretPw" not in capsys.readouterr().out


@pytest.mark.parametrize(
    "bad",
    [
        f"postgresql://ana:{SECRET}@127.0.0.1:notaport/db",
        f"host=127.0.0.1 password={SECRET} port=abc",
        f"host=127.0.0.1 password={SECRET} port=5432 dbname='unterminated",
    ],
    ids=["uri-port", "keyword-port", "unterminated-quote"],
)
def test_a_malformed_dsn_is_one_line_without_the_password(
    capsys: pytest.CaptureFixture[str], bad: str
) -> None:
    assert main(["check", "--dsn", bad]) == 1
    captured = capsys.readouterr()
    assert SECRET not in captured.out + captured.err
    assert captured.err.startswith("error: ")
    assert captured.err.count("\n") == 1
    assert "DSN" in captured.err


def test_the_library_never_shows_the_password_either() -> None:
    from langgraph_durable import ConfigurationError

    bad = f"postgresql://u:{SECRET}@h:port/x"
    with pytest.raises(ConfigurationError) as raised, DurablePostgresSaver.from_conn_string(bad):
        pass
    text = f"{raised.value} {raised.value.__cause__} {raised.value.__context__}"
    assert SECRET not in text


def test_an_unreachable_server_is_named_by_host_and_port(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["check", "--dsn", f"postgresql://u:{SECRET}@127.0.0.1:1/db"]) == 1
    err = capsys.readouterr().err
    assert "127.0.0.1:1/db" in err
    assert SECRET not in err


# "soon": no age; then past timedelta's range, and past the year 1 from now
@pytest.mark.parametrize("age", ["soon", "9999999999d", "800000d"])
def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str], age: str) -> None:
    with pytest.raises(SystemExit) as raised:
        main(["delete-idle", "--older-than", age, "--dsn", "x"])
    assert raised.value.code == 2
    assert "90m, 12h, 30d, 2w" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv",
    [
        ["runs", "list", "--limit", str(2**63)],
        ["effects", "list", "--limit", str(2**31)],
        ["effects", "resolve", "k", "--allow-retry", "--attempt", str(2**63)],
        ["threads", "list", "--limit", "0"],
    ],
)
def test_a_count_out_of_range_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    with pytest.raises(SystemExit) as raised:
        main([*argv, "--dsn", "x"])
    assert raised.value.code == 2
    assert "use a whole number from 1 to 2147483647" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["delete-idle", "--older-than", "0s"], "invalid age '0s': use one above zero"),
        (["workers", "--live-seconds", "0"], "invalid seconds '0': use a number > 0"),
        (["runs", "wait", "r", "--timeout", "1e400"], "invalid seconds '1e400'"),
        (["web", "--port", "99999"], "invalid port '99999': use a number from 1 to 65535"),
        (["web", "--port", "-1"], "invalid port '-1'"),
    ],
)
def test_values_the_command_cannot_use_are_usage_errors(
    capsys: pytest.CaptureFixture[str], argv: list[str], said: str
) -> None:
    """These passed the parser, then failed in the library with a Python-level message
    (`older_than=datetime.timedelta(0)`) or a traceback (`OverflowError` from bind)."""
    with pytest.raises(SystemExit) as raised:
        main([*argv, "--dsn", "x"])
    assert raised.value.code == 2
    assert said in capsys.readouterr().err


def test_web_on_a_port_in_use_or_a_bad_host_fails_in_one_line(
    dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """uvicorn logged the bind error and exited 3, which means "a run ended without
    success"; a command that failed exits 1 with one line."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        capsys.readouterr()
        assert main(["web", "--port", str(port), "--dsn", dsn]) == 1
        err = capsys.readouterr().err
    assert err.startswith(f"error: The web console cannot listen on 127.0.0.1:{port} (")
    assert "pick another --port" in err
    assert len(err.strip().splitlines()) == 1
    assert main(["web", "--host", "no-such-host.invalid", "--dsn", dsn]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: The web console cannot listen on no-such-host.invalid:8080")
    assert len(err.strip().splitlines()) == 1


def test_web_whose_server_fails_to_start_exits_1(
    dsn: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whatever else stops uvicorn's start (its exit 3) is a failed command too."""

    def fails_to_start(*args: Any, **kwargs: Any) -> None:
        sys.exit(3)  # what uvicorn.run does when its server did not start

    monkeypatch.setattr("langgraph_durable.web.serve", fails_to_start)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    capsys.readouterr()
    assert main(["web", "--port", str(port), "--dsn", dsn]) == 1
    assert capsys.readouterr().err.startswith(
        f"error: The web console did not start on 127.0.0.1:{port} (uvicorn's log above"
    )


def test_a_reader_that_went_away_ends_the_command_quietly(dsn: str) -> None:
    """`langgraph-durable --json doctor | head`: the reader is gone before the output is
    written (its end of the pipe is closed before the command starts)."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        done = subprocess.run(
            [sys.executable, "-m", "langgraph_durable.cli", "--json", "doctor", "--dsn", dsn],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
            check=False,
        )
    finally:
        os.close(write_end)
    assert (done.returncode, done.stderr) == (141, "")


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_output_that_cannot_be_written_is_one_error_line() -> None:
    """`langgraph-durable schema > /dev/full` ended in an OSError traceback."""
    with open("/dev/full", "w") as full:
        done = subprocess.run(
            [sys.executable, "-m", "langgraph_durable.cli", "schema"],
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
            check=False,
        )
    assert done.returncode == 1
    assert done.stderr.startswith("error: could not write the output (No space left on device)")
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr


INTERRUPTED_WAIT = """
import os, signal, sys
# Ctrl-C as a terminal gives it: a test run in the background (nohup, CI) hands its
# children SIGINT ignored, and Python then installs no KeyboardInterrupt for it.
signal.signal(signal.SIGINT, signal.default_int_handler)
from langgraph_durable.runs import RunRegistry

def wait_for(self, *args, **kwargs):
    os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C while the command waits
    raise AssertionError("SIGINT did not interrupt the wait")

RunRegistry.wait_for = wait_for
from langgraph_durable.cli import main
sys.exit(main(sys.argv[1:]))
"""


def test_ctrl_c_during_a_wait_exits_130_with_one_line(dsn: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", INTERRUPTED_WAIT, "runs", "wait", "some-run", "--dsn", dsn],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert (done.returncode, done.stderr) == (130, "error: interrupted\n")


@pytest.mark.parametrize(
    ("spec", "said"),
    [
        ("json:JSONDecoder", "--graph 'json:JSONDecoder': calling it failed (TypeError: "),
        (".rel:x", "--graph '.rel:x' could not be loaded (TypeError: "),
        ("no_such_module_lgd:x", "could not be loaded (ModuleNotFoundError: "),
    ],
)
def test_a_graph_that_cannot_be_loaded_is_one_error_line(
    dsn: str, capsys: pytest.CaptureFixture[str], spec: str, said: str
) -> None:
    capsys.readouterr()
    argv = ["approvals", "approve", "t", "--approver", "dana", "--graph", spec, "--dsn", dsn]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ")
    assert said in err
    assert len(err.strip().splitlines()) == 1


def test_the_help_names_every_exit_code(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "`runs wait` and `approvals approve|reject` also 3" in out
    assert "`doctor` 1 when a check failed, 5 when it found only warnings" in out


def test_version_prints_the_package_version(capsys: pytest.CaptureFixture[str]) -> None:
    from importlib.metadata import version

    with pytest.raises(SystemExit) as raised:
        main(["--version"])
    assert raised.value.code == 0
    assert capsys.readouterr().out.strip() == f"langgraph-durable {version('langgraph-durable')}"
    assert package_name == "langgraph_durable"


def test_every_command_option_and_argument_has_help() -> None:
    missing = []

    def visit(name: str, parser: argparse.ArgumentParser) -> int:
        seen = 1
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                helped = {a.dest for a in action._choices_actions if a.help}
                missing.extend(f"{name} {c}" for c in action.choices if c not in helped)
                for sub_name, sub in action.choices.items():
                    seen += visit(f"{name} {sub_name}".strip(), sub)
            elif not isinstance(action, argparse._HelpAction) and not action.help:
                missing.append(f"{name} {action.dest}")
        return seen

    assert visit("", _parser()) > 30  # the nested commands were visited too
    assert not missing


def test_the_installed_command_runs(dsn: str) -> None:
    command = Path(sys.executable).with_name("langgraph-durable")
    done = subprocess.run(
        [str(command), "check", "--json", "--dsn", dsn],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"schema": "ok"}
    failed = subprocess.run(
        [str(command), "check", "--dsn", f"postgresql://u:{SECRET}@h:x/db"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert failed.returncode == 1
    assert SECRET not in failed.stdout + failed.stderr
    assert "Traceback" not in failed.stderr


def test_json_nested_too_deeply_is_a_named_error(
    dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    key = f"cli-effect-{uuid.uuid4()}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO langgraph_durable_effects (key, effect_name, input_hash, status, "
            "attempt) VALUES (%s, 'mail', 'h', 'unknown', 1)",
            (key,),
        )
    deep = "[" * 100_000 + "]" * 100_000
    capsys.readouterr()
    assert main(["effects", "resolve", key, "--completed", deep, "--dsn", dsn]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: --completed is JSON nested too deeply"), err
    assert "Traceback" not in err


@pytest.mark.parametrize("value", ["NaN", '{"x": Infinity}', "[-Infinity]"])
def test_json_options_refuse_numbers_json_cannot_hold(
    dsn: str, value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    key = f"cli-effect-{uuid.uuid4()}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO langgraph_durable_effects (key, effect_name, input_hash, status, "
            "attempt) VALUES (%s, 'mail', 'h', 'unknown', 1)",
            (key,),
        )
    capsys.readouterr()
    assert main(["effects", "resolve", key, "--completed", value, "--dsn", dsn]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: --completed must be JSON: "), err
    assert "nothing was changed" in err
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(
            "SELECT status FROM langgraph_durable_effects WHERE key = %s", (key,)
        ).fetchone()
    assert row == ("unknown",)


def test_json_output_names_numbers_json_cannot_hold() -> None:
    shown = json.loads(as_json({"x": float("nan"), "y": [float("inf"), -float("inf"), 1.5]}))
    assert shown == {"x": "NaN", "y": ["Infinity", "-Infinity", 1.5]}
