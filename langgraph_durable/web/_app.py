"""The console's routes: read the database, call the library, render a template.

The approval routes are in `_answers.py`; what every route shares is in `_console.py`.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from langgraph.pregel import Pregel
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from langgraph_durable._db import source_of
from langgraph_durable._sql import QUERIES
from langgraph_durable.checkpoint import AsyncDurablePostgresSaver
from langgraph_durable.errors import (
    ConfigurationError,
    DatabaseUnreachableError,
    DurableError,
    EffectError,
    InvalidInputError,
    NotWaitingError,
    RunConflictError,
    RunNotFoundError,
    ThreadBusyError,
)
from langgraph_durable.runs import GraphVersion, RunStatus
from langgraph_durable.serde import describing
from langgraph_durable.web import _views as views
from langgraph_durable.web._answers import answer, approval, inbox
from langgraph_durable.web._console import Console, MayResolve, graphs_given
from langgraph_durable.web._forms import (
    Refused,
    attempt_field,
    json_field,
    key_field,
    text_field,
    thread_id_field,
)
from langgraph_durable.web._security import Authenticate, new_secret

__all__ = ["create_app"]

logger = logging.getLogger(__name__)

# -- runs and threads ------------------------------------------------------------------------


async def runs(console: Console, request: Request) -> Response:
    await console.reader(request)
    status = request.query_params.get("status") or None
    if status is not None and status not in {s.value for s in RunStatus}:
        raise Refused(400, f"Unknown status {status!r}.")
    stuck = await console.registry.astuck(limit=100)
    found = await console.registry.alist(status=status, limit=500)
    stuck_ids = {r.run_id for r in stuck}
    groups = views.by_status(r for r in found if r.run_id not in stuck_ids)
    workers = await console.registry.aworkers()
    return await console.page(
        request,
        "runs.html",
        stuck=stuck,
        groups=groups,
        workers=workers,
        chosen=status,
        statuses=[s.value for s in views.STATUS_ORDER],
    )


async def run_page(console: Console, request: Request) -> Response:
    await console.reader(request)
    run_id = request.path_params["run_id"]
    try:
        found = await console.registry.aget(run_id)
    except (RunNotFoundError, InvalidInputError) as exc:
        raise Refused(404, str(exc)) from exc
    # Shown with the serializer's describing twin: the console may run without the
    # application's modules, whose own types are then shown as their stored fields.
    output, unshown = None, None
    if found.finished and found.stored_output is not None:
        try:
            output = describing(console.registry.serde).loads_typed(found.stored_output)
        except Exception as exc:  # a cipher key this process lacks, a damaged row
            logger.warning("The output of run %r cannot be loaded", run_id, exc_info=exc)
            unshown = views.shown_error(exc)
    return await console.page(request, "run.html", run=found, output=output, unshown=unshown)


async def thread(console: Console, request: Request) -> Response:
    await console.reader(request)
    thread_id = thread_id_field(request.query_params.get("thread_id", ""))
    source = source_of(console.saver)
    params: dict[str, Any] = {"thread_id": thread_id, "limit": 200}
    async with source.connection("reading a thread's timeline (console)") as conn:
        cur = await conn.execute(QUERIES["console_thread_checkpoints"], params)
        checkpoints = await cur.fetchall()
        ids = [row["checkpoint_id"] for row in checkpoints]
        cur = await conn.execute(
            QUERIES["console_thread_writes"], {"thread_id": thread_id, "checkpoint_ids": ids}
        )
        writes = await cur.fetchall()
    effects = await console.journal.athread_effects(thread_id, 1000)
    if not checkpoints and not effects:
        raise Refused(404, f"No checkpoints or effects for thread {thread_id!r}.")
    steps, unplaced = views.timeline(describing(console.saver.serde), checkpoints, writes, effects)
    thread_runs = await console.registry.alist(thread_id=thread_id, limit=50)
    return await console.page(
        request,
        "thread.html",
        thread_id=thread_id,
        steps=steps,
        unplaced=unplaced,
        runs=thread_runs,
        ledger=await console.journal.atoken_ledger(thread_id),
    )


# -- effects ---------------------------------------------------------------------------------


async def effects(console: Console, request: Request) -> Response:
    user = await console.reader(request)
    rows = await console.journal.aopen_effects(None, 500)
    unknown = [r for r in rows if r["status"] == "unknown"]
    others = [r for r in rows if r["status"] != "unknown"]
    return await console.page(
        request,
        "effects.html",
        unknown=unknown,
        others=others,
        not_resolver=await _not_resolver(console, user) if unknown else None,
    )


async def _not_resolver(console: Console, user: str | None) -> str | None:
    """Why the page shows `user` no resolve forms, in words for the page; None if it
    shows them. Asked before the page is drawn, so a user `may_resolve` refuses is told
    so, rather than shown buttons that each end in a 403."""
    if console.read_only or user is None:
        return None  # the template says nothing can be changed, or to sign in
    try:
        refusal = await console.resolve_refusal(user)
    except Exception as exc:  # the application's own hook: this page goes on without forms
        logger.exception("The may_resolve hook raised for %r", user)
        return f"cannot check who may resolve effects: {type(exc).__name__}"
    if refusal is None:
        return None
    return f"you ({user}) may not resolve effects" + (f": {refusal}" if refusal else "")


async def resolve(console: Console, request: Request) -> Response:
    user, form = await console.actor(request)
    try:
        refusal = await console.resolve_refusal(user)
    except Exception as exc:  # the application's own hook failed: say so, not a bare 500
        logger.exception("The may_resolve hook raised for %r", user)
        raise Refused(
            500,
            f"The console's may_resolve hook raised {type(exc).__name__}, so it cannot "
            f"check whether {user} may resolve effects. Nothing was changed; see the "
            "server's log.",
        ) from exc
    if refusal is not None:
        why = f": {refusal}" if refusal else ""
        raise Refused(403, f"{user} may not resolve effects{why}. Nothing was changed.")
    key = key_field(form)
    how = form.get("how")
    by = f"console:{user}"
    attempt = attempt_field(form.get("attempt"))
    if how == "allow_retry":
        await console.journal.aresolve(key, allow_retry=True, resolved_by=by, attempt=attempt)
    elif how == "failed":
        reason = text_field(form, "reason", "The reason").strip()
        if not reason:
            raise Refused(400, "Give the reason replays will raise.")
        await console.journal.aresolve(key, failed=reason, resolved_by=by, attempt=attempt)
    elif how == "completed":
        result = json_field(form, "result", "The receiver's result")
        await console.journal.aresolve(key, completed=result, resolved_by=by, attempt=attempt)
    else:
        raise Refused(400, "Choose allow_retry, completed or failed.")
    return console.back_to(request, "effects", "resolved")


# -- the application -------------------------------------------------------------------------

CONFLICTS = (NotWaitingError, RunConflictError, ThreadBusyError, EffectError)


def _route(console: Console, handler: Any) -> Any:
    async def endpoint(request: Request) -> Response:
        try:
            response: Response = await handler(console, request)
            return response
        except Refused as refused:
            status, message = refused.status, refused.message
        except CONFLICTS as exc:
            status, message = 409, str(exc)
        except InvalidInputError as exc:
            status, message = 400, str(exc)
        except DatabaseUnreachableError as exc:
            status, message = 503, str(exc)
        except DurableError as exc:  # their messages never hold a password
            status, message = 500, str(exc)
        return await console.page(request, "message.html", status=status, message=message)

    endpoint.__name__ = handler.__name__
    return endpoint


def create_app(
    saver: AsyncDurablePostgresSaver,
    *,
    graphs: Sequence[Pregel[Any, Any, Any, Any] | GraphVersion] = (),
    authenticate: Authenticate | None = None,
    read_only: bool = False,
    secret_key: bytes | str | None = None,
    may_resolve: MayResolve | None = None,
    title: str = "langgraph-durable",
) -> Starlette:
    """The console as an ASGI app: mount it in your app, or serve it with `serve()`.

    Args:
        saver: An async saver on the database to show (open for as long as the app runs).
        graphs: The graphs answers may resume, compiled with `saver` (or `GraphVersion`s
            of them). Without them the pages still show everything, and nothing is answered.
        authenticate: `request -> user name | None` (may be async): your sign-in. The name
            is the approver of every answer, judged by the graph's `authorize` hook. A
            request it returns None for is refused (401). Without it, pages are open and
            nothing can be changed.
        read_only: Show, never change: every form is hidden and every POST refused.
        secret_key: Signs the CSRF tokens; give the same one to every process behind a
            load balancer (default: random per process).
        may_resolve: `user -> True, or the reason why not` (may be async), as the
            approval `authorize` hook: who may resolve unknown effects. Only True lets
            the user resolve; a string is the reason the page shows, and anything else
            (False, None) refuses too; another truthy value (a dict entry, 1) refuses
            saying the hook returned it, and warns in the log once (default: any
            signed-in user).
        title: Shown in the page header.
    """
    if not isinstance(saver, AsyncDurablePostgresSaver):
        raise ConfigurationError(
            f"create_app needs an AsyncDurablePostgresSaver; got a {type(saver).__name__}. "
            "Open one with `async with AsyncDurablePostgresSaver.from_conn_string(dsn)`."
        )
    secret = secret_key.encode() if isinstance(secret_key, str) else secret_key
    console = Console(
        saver=saver,
        graphs=graphs_given(graphs),
        authenticate=authenticate,
        read_only=read_only,
        secret=secret or new_secret(),
        may_resolve=may_resolve,
        title=title,
    )
    routes = [
        Route("/", _route(console, inbox), name="inbox"),
        Route("/approval", _route(console, approval), name="approval"),
        Route("/approval/answer", _route(console, answer), methods=["POST"], name="answer"),
        Route("/runs", _route(console, runs), name="runs"),
        Route("/runs/{run_id}", _route(console, run_page), name="run"),
        Route("/thread", _route(console, thread), name="thread"),
        Route("/effects", _route(console, effects), name="effects"),
        Route("/effects/resolve", _route(console, resolve), methods=["POST"], name="resolve"),
    ]
    return Starlette(routes=routes)
