"""Serving the console on its own, for `langgraph-durable web`.

The saver is opened when the server starts and closed when it stops; graphs named on the
command line (`module:attribute`) are compiled with it, so the console can resume them.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any

from langgraph.graph import StateGraph
from langgraph.pregel import Pregel
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Mount
from starlette.types import ASGIApp, Receive, Scope, Send

from langgraph_durable._imports import import_from_here
from langgraph_durable.checkpoint import AsyncDurablePostgresSaver, DurablePostgresSaver
from langgraph_durable.errors import ConfigurationError, DurableError, MissingExtraError
from langgraph_durable.runs import GraphVersion
from langgraph_durable.web._app import create_app

__all__ = ["load_graph", "serve", "standalone_app"]


def find_graph(spec: str) -> Any:
    """What `module:attribute` names, imported; `ConfigurationError` if it cannot be."""
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise ConfigurationError(f"--graph {spec!r}: write it as module:attribute.")
    try:
        return getattr(import_from_here(module_name), attribute)
    except (ImportError, AttributeError) as exc:
        raise ConfigurationError(
            f"--graph {spec!r}: cannot import it ({exc}). Check the name, and run the "
            "command where the module is (the current directory is searched) or put its "
            "folder on PYTHONPATH."
        ) from exc
    except Exception as exc:  # the module's own code failed while it was imported
        raise ConfigurationError(
            f"--graph {spec!r}: importing it raised {type(exc).__name__}: {exc}"
        ) from exc


def graph_maker(spec: str) -> Any:
    """What `module:attribute` names, imported and checked without being called: a
    `StateGraph`, or a function that takes the saver as its one argument. Anything else is
    a `ConfigurationError`; `serve` asks before the server starts, so a wrong `--graph`
    fails in one line rather than in a traceback from the server's start-up."""
    found = find_graph(spec)
    if isinstance(found, StateGraph):
        return found
    if isinstance(found, Pregel):
        raise ConfigurationError(
            f"--graph {spec!r} is a compiled graph, which has no saver of the console's: name "
            "its StateGraph (the console compiles it), or a function that takes the saver "
            "and returns the compiled graph or a GraphVersion."
        )
    if not callable(found):
        raise ConfigurationError(
            f"--graph {spec!r} is of type {type(found).__name__}, neither a StateGraph nor a "
            "function that takes the saver and returns a compiled graph or a GraphVersion."
        )
    try:
        inspect.signature(found).bind(None)
    except TypeError:
        raise ConfigurationError(
            f"--graph {spec!r} is a function that cannot take the saver as its one "
            "argument: define it as `def graph(saver): return builder.compile(checkpointer="
            "saver)`."
        ) from None
    except ValueError:  # no signature to read (some built-ins): calling it will tell
        pass
    return found


def load_graph(
    spec: str, saver: AsyncDurablePostgresSaver
) -> Pregel[Any, Any, Any, Any] | GraphVersion:
    """The graph named by `module:attribute`, compiled with `saver`.

    The attribute is a `StateGraph` (compiled here), or a function that takes the saver
    and returns a compiled graph or a `GraphVersion`.
    """
    found = graph_maker(spec)
    if isinstance(found, StateGraph):
        return found.compile(checkpointer=saver)
    try:
        made = found(saver)
    except DurableError:
        raise
    except Exception as exc:  # the user's function failed: its error, in one line
        raise ConfigurationError(
            f"--graph {spec!r} raised {type(exc).__name__} when called with the "
            f"console's saver: {exc}"
        ) from exc
    if isinstance(made, (Pregel, GraphVersion)):
        return made
    raise ConfigurationError(
        f"--graph {spec!r} returned a {type(made).__name__}; the function must return a "
        "compiled graph or a GraphVersion."
    )


async def _load_graphs(dsn: str, graphs: Sequence[str]) -> None:
    """Each `--graph` compiled with a saver of its own, so that `serve` can refuse the
    ones that fail before the server starts."""
    async with AsyncDurablePostgresSaver.from_conn_string(dsn) as saver:
        for spec in graphs:
            load_graph(spec, saver)


def one_sign_in_header(app: ASGIApp, header: str) -> ASGIApp:
    """`app`, with a request that carries the sign-in header more than once refused (403).

    The proxy in front sets the header and must strip what clients send; if it appends
    instead, the request holds the client's copy too, and taking either one could sign in
    whoever the client names."""
    name = header.lower().encode("latin-1")
    message = (
        f"Refused: the sign-in header ({header}) appears more than once, so who is signed in "
        "is not clear. Have the proxy replace the header a client sends, not add to it."
    )

    async def guarded(scope: Scope, receive: Receive, send: Send) -> None:
        copies = sum(1 for key, _ in scope.get("headers", ()) if key == name)
        if scope["type"] == "http" and copies > 1:
            await PlainTextResponse(message, status_code=403)(scope, receive, send)
            return
        await app(scope, receive, send)

    return guarded


def standalone_app(
    dsn: str,
    *,
    graphs: Sequence[str] = (),
    read_only: bool = False,
    user_header: str | None = None,
    secret_key: str | None = None,
) -> Starlette:
    """The console as its own app: opens the saver on start-up, closes it on shutdown."""
    authenticate: Callable[[Request], str | None] | None = None
    if user_header:
        header = user_header

        def authenticate(request: Request) -> str | None:
            return request.headers.get(header) or None

    app = Starlette()

    @asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        async with AsyncDurablePostgresSaver.from_conn_string(dsn) as saver:
            await saver.acheck_schema()  # a database without setup() fails here, clearly
            console = create_app(
                saver,
                graphs=[load_graph(g, saver) for g in graphs],
                authenticate=authenticate,
                read_only=read_only,
                secret_key=secret_key,
            )
            guarded = one_sign_in_header(console, user_header) if user_header else console
            app.router.routes.append(Mount("/", app=guarded))
            yield

    app.router.lifespan_context = lifespan
    return app


def serve(
    dsn: str,
    *,
    host: str = "127.0.0.1",
    port: int = 8080,
    graphs: Sequence[str] = (),
    read_only: bool = False,
    user_header: str | None = None,
    secret_key: str | None = None,
) -> None:
    """Serve the console with uvicorn until interrupted."""
    try:
        import uvicorn
    except ImportError as exc:
        raise MissingExtraError(
            "Serving the console needs uvicorn: pip install 'langgraph-durable[web]'."
        ) from exc
    # Fail here, in one clear line, on a wrong DSN, a database without setup() or a graph
    # that cannot be imported, is of the wrong kind, or whose function raises or returns
    # something else: inside the app's start-up uvicorn would print a traceback, then say
    # that the server did not start. Each function is called once here with a saver of
    # its own, and again with the one the server opens.
    with DurablePostgresSaver.from_conn_string(dsn) as saver:
        saver.check_schema()
    for spec in graphs:
        graph_maker(spec)
    if graphs:
        asyncio.run(_load_graphs(dsn, graphs))
    app = standalone_app(
        dsn, graphs=graphs, read_only=read_only, user_header=user_header, secret_key=secret_key
    )
    # The plain asyncio loop and h11, and no websockets (the console has none): uvicorn's
    # automatic choice imports uvloop, httptools and websockets by name, which
    # `--graph`'s directory (put last on sys.path) would supply when they are not
    # installed, and run.
    uvicorn.run(app, host=host, port=port, log_level="info", loop="asyncio", http="h11", ws="none")
