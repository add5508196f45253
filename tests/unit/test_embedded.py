"""The embedded Postgres starts in a temporary folder, answers queries and stops cleanly."""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from langgraph_durable import ConfigurationError
from langgraph_durable.cli import main
from langgraph_durable.embedded import (
    DSN_ENV_VAR,
    resolve_dsn,
    start_embedded_postgres,
    stop_detached,
)


@pytest.fixture
def private_tmp() -> Iterator[Path]:
    # Not pytest's tmp_path: as root, pgserver opens up the parents of its data dir.
    path = Path(tempfile.mkdtemp(prefix="langgraph-durable-pg-test-"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def test_resolve_dsn_starts_embedded_select_1_and_stop(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(DSN_ENV_VAR, raising=False)
    dsn, pg = resolve_dsn()
    assert pg is not None
    try:
        assert dsn == pg.dsn
        assert pg.data_dir.parent.name.startswith("langgraph-durable-pg-")
        with psycopg.connect(dsn) as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)
    finally:
        pg.stop()
    assert not pg.running
    assert not pg.data_dir.parent.exists()  # the temporary folder is removed
    with pytest.raises(psycopg.OperationalError):
        psycopg.connect(dsn, connect_timeout=2).close()
    pg.stop()  # idempotent


def test_explicit_data_dir_is_kept_and_reusable(private_tmp: Path) -> None:
    data_dir = private_tmp / "nested" / "pgdata"
    with start_embedded_postgres(data_dir) as pg, psycopg.connect(pg.dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE kept (x int)")
    assert (data_dir / "PG_VERSION").exists()

    with start_embedded_postgres(str(data_dir)) as pg, psycopg.connect(pg.dsn) as conn:
        assert conn.execute("SELECT to_regclass('kept') IS NOT NULL").fetchone() == (True,)


def test_resolve_dsn_prefers_explicit_then_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(DSN_ENV_VAR, "postgresql://from-env/db")
    assert resolve_dsn("postgresql://explicit/db") == ("postgresql://explicit/db", None)
    assert resolve_dsn() == ("postgresql://from-env/db", None)


def test_a_data_dir_holding_other_files_is_named_with_the_fix(
    private_tmp: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Two folders: pgserver keeps the server it failed to start, per folder and process.
    library, cli = private_tmp / "library", private_tmp / "cli"
    for data_dir in (library, cli):
        data_dir.mkdir()
        (data_dir / "notes.txt").write_text("mine")
    with pytest.raises(ConfigurationError, match="must be empty") as raised:
        start_embedded_postgres(library)
    assert "initdb failed" in str(raised.value)
    capsys.readouterr()
    assert main(["db", "start", "--data-dir", str(cli)]) == 1
    err = capsys.readouterr().err
    assert "error: Could not start an embedded Postgres" in err
    assert "Traceback" not in err
    assert (library / "notes.txt").read_text() == (cli / "notes.txt").read_text() == "mine"


def test_a_data_dir_of_another_major_version_is_named_with_the_fix(
    private_tmp: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data_dir = private_tmp / "old"
    data_dir.mkdir()
    (data_dir / "PG_VERSION").write_text("9\n")  # no embedded server is that old
    (data_dir / "postmaster.pid").write_text("1\n")
    with pytest.raises(ConfigurationError, match="another PostgreSQL major version"):
        start_embedded_postgres(data_dir)
    for action in ("start", "url"):
        capsys.readouterr()
        assert main(["db", action, "--data-dir", str(data_dir)]) == 1
        err = capsys.readouterr().err
        assert err.startswith("error: The data directory"), err


SIGTERMED = """
import signal, sys
from langgraph_durable.embedded import start_embedded_postgres

if sys.argv[1] == "own handler":
    def mine(signum, frame):
        print("mine", flush=True)
    signal.signal(signal.SIGTERM, mine)
pg = start_embedded_postgres()
if sys.argv[1] == "own handler":
    assert signal.getsignal(signal.SIGTERM) is mine
    pg.stop()
    print("kept", flush=True)
    sys.exit(0)
print(pg.dsn, pg.data_dir, sep="\\n", flush=True)
sys.stdin.read()  # until the test sends SIGTERM
"""


def test_sigterm_stops_the_server_then_ends_the_process() -> None:
    """A demo killed with SIGTERM left its server running: `atexit` does not run then."""
    child = subprocess.Popen(
        [sys.executable, "-c", SIGTERMED, "default"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    dsn, data_dir = child.stdout.readline().strip(), Path(child.stdout.readline().strip())
    try:
        with psycopg.connect(dsn) as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)
        child.send_signal(signal.SIGTERM)
        assert child.wait(timeout=120) == -signal.SIGTERM
        assert not data_dir.parent.exists()  # stopped, and its temporary folder removed
        with pytest.raises(psycopg.OperationalError):
            psycopg.connect(dsn, connect_timeout=2).close()
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        if data_dir.exists():  # a failed run leaves no server behind either
            stop_detached(data_dir)
            shutil.rmtree(data_dir.parent, ignore_errors=True)


def test_an_applications_own_sigterm_handler_is_left_alone() -> None:
    done = subprocess.run(
        [sys.executable, "-c", SIGTERMED, "own handler"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert (done.returncode, done.stdout) == (0, "kept\n"), done.stderr
