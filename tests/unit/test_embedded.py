"""The embedded Postgres starts in a temporary folder, answers queries and stops cleanly;
a process stops only the servers it started, and leaves no server nor folder behind when
stopped while one starts.

Real processes, each checked for what it leaves: servers still running on its data
directory, temporary folders. A process is stopped at a named point by wrapping
`_pgserver.get_server` (the call that runs `initdb` and `pg_ctl start`), so no test waits
on a clock.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psutil
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
        for process in servers_under(path):  # what a failing run left behind
            process.kill()
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


def test_a_data_dir_holding_other_files_is_refused_before_it_is_touched(
    private_tmp: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """As root, pgserver handed such a folder to its `pgserver` user before `initdb` found
    it not empty, and its failure printed some 20 lines of log."""
    library, cli = private_tmp / "library", private_tmp / "cli"
    for data_dir in (library, cli):
        data_dir.mkdir()
        (data_dir / "notes.txt").write_text("mine")
    owners = {d: (d.stat().st_uid, d.stat().st_gid) for d in (library, cli)}
    with pytest.raises(ConfigurationError, match="is not empty and holds no cluster"):
        start_embedded_postgres(library)
    capsys.readouterr()
    assert main(["db", "start", "--data-dir", str(cli)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"error: The data directory {cli} is not empty and holds no cluster")
    assert len(err.strip().splitlines()) == 1, err
    assert (library / "notes.txt").read_text() == (cli / "notes.txt").read_text() == "mine"
    assert {d: (d.stat().st_uid, d.stat().st_gid) for d in (library, cli)} == owners
    assert sorted(p.name for p in cli.iterdir()) == ["notes.txt"]


@pytest.mark.parametrize("where", ["a file", "below a file"])
def test_a_data_dir_that_is_a_file_is_one_error_line(
    private_tmp: Path, capsys: pytest.CaptureFixture[str], where: str
) -> None:
    """FileExistsError and NotADirectoryError tracebacks before."""
    afile = private_tmp / "afile"
    afile.write_text("x")
    data_dir = afile if where == "a file" else afile / "sub"
    with pytest.raises(ConfigurationError, match="cannot be used"):
        start_embedded_postgres(data_dir)
    capsys.readouterr()
    assert main(["db", "start", "--data-dir", str(data_dir)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"error: The data directory {data_dir} cannot be used (")
    assert len(err.strip().splitlines()) == 1, err


def test_a_data_dir_of_another_major_version_is_named_with_the_fix(
    private_tmp: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data_dir = private_tmp / "old"
    data_dir.mkdir()
    (data_dir / "PG_VERSION").write_text("9\n")  # no embedded server is that old
    (data_dir / "postmaster.pid").write_text("1\n")
    with pytest.raises(ConfigurationError, match="another PostgreSQL major version"):
        start_embedded_postgres(data_dir)
    capsys.readouterr()
    assert main(["db", "start", "--data-dir", str(data_dir)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: The data directory"), err
    assert main(["db", "url", "--data-dir", str(data_dir)]) == 1  # no server runs there
    assert capsys.readouterr().err.startswith("error: No embedded Postgres runs on")


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


def servers_under(path: Path) -> list[psutil.Process]:
    """Postmasters whose command line names a folder under `path`."""
    found = []
    for process in psutil.process_iter(["name", "cmdline"]):
        cmdline = process.info["cmdline"] or []
        if process.info["name"] == "postgres" and any(str(path) in part for part in cmdline):
            found.append(process)
    return found


def cli(*argv: str) -> subprocess.CompletedProcess[str]:
    """The CLI in a process of its own, as a user runs it."""
    return subprocess.run(
        [sys.executable, "-m", "langgraph_durable.cli", *argv],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


STOPPED_WHILE_STARTING = """
import os, signal, sys
from langgraph_durable import _pgserver, embedded

how, when = sys.argv[1], sys.argv[2]
real = _pgserver.get_server

def stop_here():
    if how == "sigterm":
        os.kill(os.getpid(), signal.SIGTERM)  # a container stop, a CI timeout
    else:
        raise KeyboardInterrupt  # Ctrl-C

def get_server(*args, **kwargs):
    if when == "before":  # the temporary folder is made, the server not yet started
        stop_here()
    server = real(*args, **kwargs)
    if when == "after":  # the server runs, the handle is not made yet
        stop_here()
    return server

_pgserver.get_server = get_server
try:
    embedded.start_embedded_postgres()
except KeyboardInterrupt:
    print("interrupted", flush=True)
    sys.exit(0)
print("started", flush=True)
"""


@pytest.mark.parametrize(
    ("how", "when"), [("sigterm", "before"), ("sigterm", "after"), ("ctrl-c", "after")]
)
def test_a_start_stopped_midway_leaves_no_server_and_no_folder(
    private_tmp: Path, how: str, when: str
) -> None:
    """SIGTERM came before the handler was installed (it was, in the handle's constructor)
    and left the 39 MB temporary folder, and a running server; a start interrupted
    otherwise removed the folder of a server it left running."""
    done = subprocess.run(
        [sys.executable, "-c", STOPPED_WHILE_STARTING, how, when],
        env={**os.environ, "TMPDIR": str(private_tmp)},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    if how == "sigterm":
        assert done.returncode == -signal.SIGTERM, done.stdout + done.stderr
    else:
        assert (done.returncode, done.stdout) == (0, "interrupted\n"), done.stderr
    assert servers_under(private_tmp) == []
    assert list(private_tmp.glob("langgraph-durable-pg-*")) == []


def test_db_url_and_stop_do_not_start_a_server_a_crash_left_a_pid_file(
    private_tmp: Path,
) -> None:
    data_dir = private_tmp / "pgdata"
    assert cli("db", "start", "--data-dir", str(data_dir)).returncode == 0
    left_behind = (data_dir / "postmaster.pid").read_text()
    assert cli("db", "stop", "--data-dir", str(data_dir)).returncode == 0
    # As a killed server leaves it: the file names a postmaster that is gone.
    (data_dir / "postmaster.pid").write_text(left_behind)
    url = cli("db", "url", "--data-dir", str(data_dir))
    assert (url.returncode, url.stdout) == (1, "")
    assert url.stderr.startswith(f"error: No embedded Postgres runs on {data_dir}")
    stop = cli("db", "stop", "--data-dir", str(data_dir), "--json")
    assert (stop.returncode, json.loads(stop.stdout)) == (0, {"stopped": False})
    assert servers_under(private_tmp) == []


def test_a_handle_stops_only_a_server_it_started(private_tmp: Path) -> None:
    """A handle on the directory `db start` serves stopped that server when it stopped."""
    data_dir = private_tmp / "pgdata"
    started = cli("db", "start", "--data-dir", str(data_dir), "--json")
    assert started.returncode == 0, started.stderr
    dsn = json.loads(started.stdout)["dsn"]
    try:
        with start_embedded_postgres(data_dir) as pg, psycopg.connect(pg.dsn) as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)
        assert not pg.running
        with psycopg.connect(dsn) as conn:  # db start's server still runs
            assert conn.execute("SELECT 1").fetchone() == (1,)
    finally:
        stopped = cli("db", "stop", "--data-dir", str(data_dir), "--json")
    assert json.loads(stopped.stdout) == {"stopped": True}
    assert servers_under(private_tmp) == []


SHARING = """
import sys
from langgraph_durable.embedded import start_embedded_postgres

with start_embedded_postgres(sys.argv[1]) as pg:
    print("started", flush=True)
    sys.stdin.readline()  # until the test says stop
print("stopped", flush=True)
"""


def test_two_processes_on_one_data_dir_share_its_server_until_the_last_stops(
    private_tmp: Path,
) -> None:
    """The second process's handle did not count among the server's users, so the first
    stopping stopped the server under the second."""
    data_dir = private_tmp / "pgdata"
    first = subprocess.Popen(
        [sys.executable, "-c", SHARING, str(data_dir)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert first.stdout is not None
        assert first.stdin is not None
        assert first.stdout.readline() == "started\n"
        with start_embedded_postgres(data_dir) as pg:
            first.stdin.write("\n")
            first.stdin.flush()
            assert first.stdout.readline() == "stopped\n"
            assert first.wait(timeout=300) == 0
            with psycopg.connect(pg.dsn) as conn:  # still ours to use
                assert conn.execute("SELECT 1").fetchone() == (1,)
        assert servers_under(private_tmp) == []
    finally:
        if first.poll() is None:
            first.kill()
