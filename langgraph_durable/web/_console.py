"""The console's state and what every route shares: rendering, who reads and who acts,
links, and which given graph a thread waits in.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

from jinja2 import Environment, FileSystemLoader, select_autoescape
from langgraph.pregel import Pregel
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from langgraph_durable.checkpoint import AsyncDurablePostgresSaver
from langgraph_durable.effects import AsyncEffectJournal, journal_of
from langgraph_durable.errors import ConfigurationError, DatabaseUnreachableError
from langgraph_durable.runs import AsyncRunRegistry, GraphVersion, Run
from langgraph_durable.web import _views as views
from langgraph_durable.web._forms import Refused, in_form
from langgraph_durable.web._security import (
    Authenticate,
    csrf_token,
    csrf_valid,
    current_user,
    ensure_session,
    set_session_cookie,
)

__all__ = ["Console", "GivenGraph", "MayResolve", "graphs_given", "link"]

logger = logging.getLogger(__name__)

PATHS = {
    "inbox": "/",
    "approval": "/approval",
    "answer": "/approval/answer",
    "runs": "/runs",
    "run": "/runs/{run_id}",
    "thread": "/thread",
    "effects": "/effects",
    "resolve": "/effects/resolve",
}

NOTICES = {
    "answered": "Your answer was sent and the run went on.",
    "asked_again": "Your answer was sent; the graph asks again (see why below).",
    "queued": "Your answer was sent; a worker resumes the run.",
    "resolved": "The effect was resolved; resume its thread (or retry its run).",
}


MayResolve = Callable[[str], "bool | str | Awaitable[bool | str]"]
"""`user -> True, or the reason why not` (may be async): who may resolve unknown effects."""


@dataclass(frozen=True)
class GivenGraph:
    """A graph given to `create_app`, with its name and, for a `GraphVersion`, version."""

    name: str | None
    version: str | None
    graph: Pregel[Any, Any, Any, Any]


@dataclass
class Console:
    saver: AsyncDurablePostgresSaver
    graphs: list[GivenGraph]
    authenticate: Authenticate | None
    read_only: bool
    secret: bytes
    may_resolve: MayResolve | None
    title: str
    env: Environment = field(init=False)
    warned_of_verdict: bool = field(default=False, init=False)
    """Whether the log was told of a `may_resolve` verdict neither True nor a string: once
    per console, not on every page."""

    def __post_init__(self) -> None:
        self.env = Environment(
            loader=FileSystemLoader(Path(__file__).parent / "templates"),
            autoescape=select_autoescape(default=True, default_for_string=True),
        )
        self.env.filters["redact"] = views.redacted  # every error text a page shows
        self.env.filters["in_form"] = in_form  # text a hidden field carries, line breaks kept
        self.registry = AsyncRunRegistry(self.saver)
        journal = journal_of(self.saver)
        assert isinstance(journal, AsyncEffectJournal)
        self.journal = journal

    # -- rendering and guards ------------------------------------------------------------

    async def page(
        self, request: Request, template: str, status: int = 200, **context: Any
    ) -> Response:
        session = ensure_session(request)
        user = await current_user(self.authenticate, request)
        html = self.env.get_template(template).render(
            request=request,
            url=lambda name, **query: link(request, name, **query),
            title=self.title,
            user=user,
            read_only=self.read_only,
            csrf=csrf_token(self.secret, session, user),
            notice=NOTICES.get(request.query_params.get("notice", "")),
            json=views.as_json,
            age=views.human_age,
            **context,
        )
        response = HTMLResponse(html, status_code=status)
        response.headers["Cache-Control"] = "no-store"
        response.headers["X-Frame-Options"] = "DENY"
        response.headers["Content-Security-Policy"] = (
            "default-src 'self'; style-src 'unsafe-inline'"
        )
        set_session_cookie(request, response)
        return response

    async def reader(self, request: Request) -> str | None:
        """Who reads; refuses a request the authentication hook signs nobody in for."""
        user = await current_user(self.authenticate, request)
        if self.authenticate is not None and user is None:
            raise Refused(401, "Sign in to use the console.")
        return user

    async def actor(self, request: Request) -> tuple[str, dict[str, Any]]:
        """Who acts, and the form: refused in read-only mode, signed out, or without CSRF."""
        if self.read_only:
            raise Refused(403, "This console is read-only: nothing can be changed from it.")
        user = await self.reader(request)
        if user is None:
            raise Refused(
                403,
                "This console has no authentication hook, so nobody can act from it. Pass "
                "authenticate= to create_app (it names the approver).",
            )
        form = dict(await request.form())
        if not csrf_valid(self.secret, request, form.get("csrf_token"), user):
            raise Refused(
                403,
                "The form's security token is missing or belongs to another session or "
                "user; nothing was done. Reload the page and try again.",
            )
        return user, form

    def back_to(self, request: Request, name: str, notice: str, **query: str) -> Response:
        return RedirectResponse(link(request, name, notice=notice, **query), status_code=303)

    async def resolve_refusal(self, user: str) -> str | None:
        """Why `may_resolve` (sync or async, as `authenticate`) refuses `user`; None if it
        lets them resolve effects.

        The package's hook convention, as for the approval `authorize` hook: True, or the
        reason why not. Anything but True refuses: a reason is a non-empty string, which is
        truthy, and taking the hook's truth for permission once let everyone resolve. The
        reason a hook gives is shown to the user; a bare False gets an empty one ("").
        Any other truthy value (a hook written as `user -> bool` that returns a dict entry,
        a match, 1) refuses too, and says so, with a warning in the log: silence would
        leave its author wondering why nobody may resolve."""
        if self.may_resolve is None:
            return None
        verdict = self.may_resolve(user)
        if inspect.isawaitable(verdict):
            verdict = await verdict
        if verdict is True:
            return None
        if isinstance(verdict, str):
            return verdict
        if not verdict:
            return ""
        kind = type(verdict).__qualname__
        if not self.warned_of_verdict:
            self.warned_of_verdict = True
            logger.warning(
                "The console's may_resolve hook returned %s, so nobody may resolve effects; "
                "it must return True, or the reason why not (a string).",
                kind,
            )
        return f"the may_resolve hook returned {kind}; it must return True, or the reason why not"

    # -- graphs ----------------------------------------------------------------------------

    async def graph_for(
        self, thread_id: str, run: Run | None
    ) -> tuple[Pregel[Any, Any, Any, Any], Any] | str:
        """The given graph the thread waits in, with its state; or why none is used.

        A registry run names its graph: the `GraphVersion` it is pinned to (name and
        version) is tried first, then others of its name (a worker resumes it with that
        version, so its hooks are the ones to ask); never a graph of another name. A
        thread the registry never ran names none: a graph fits if it has every node the
        thread waits at, and when several fit the console refuses to guess. Graphs share
        node names (`add_approval_before` names every guard `approve_<target>`), and the
        wrong one's `authorize` hook would judge the answer and its nodes would run."""
        config: Any = {"configurable": {"thread_id": thread_id}}
        if run is not None:
            pinned = [
                g for g in self.graphs if (g.name, g.version) == (run.graph_name, run.graph_version)
            ]
            named = [g for g in self.graphs if g.name == run.graph_name and g not in pinned]
            candidates = pinned + named
        else:
            candidates = list({id(g.graph): g for g in self.graphs}.values())
        fits: list[tuple[GivenGraph, Any]] = []
        for given in candidates:
            try:
                state = await given.graph.aget_state(config)
            except DatabaseUnreachableError:
                raise
            except Exception as exc:  # this thread's state, not the page: say why
                logger.exception("Cannot read the state of thread %r", thread_id)
                return f"cannot read the thread's state: {views.shown_error(exc)}"
            waiting = [t for t in state.tasks if t.interrupts]
            if waiting and all(t.name in given.graph.nodes for t in waiting):
                if run is not None:
                    return given.graph, state
                fits.append((given, state))
        if run is not None:
            return (
                f"its run's graph {run.graph_name!r} (version {run.graph_version!r}) was not "
                "given to the console, or the thread does not wait in it"
            )
        if not fits:
            return "the console was given no graph that this thread waits in"
        if len(fits) > 1:
            names = ", ".join(f"graphs[{self.graphs.index(g)}] ({_label(g)})" for g, _ in fits)
            return (
                f"ambiguous: the given graphs {names} all have the nodes this thread waits "
                "at, and a thread the run registry never ran does not say which graph it "
                "runs in. Give the console only the graph that runs such threads, or run "
                "them through the run registry (a run names its GraphVersion)"
            )
        return fits[0][0].graph, fits[0][1]

    async def latest_run(self, thread_id: str) -> Run | None:
        found = await self.registry.alist(thread_id=thread_id, limit=1)
        return found[0] if found else None


def link(request: Request, name: str, **query: Any) -> str:
    """The URL of a console page, wherever the console is mounted (`root_path`)."""
    path = PATHS[name]
    if "{run_id}" in path:
        path = path.replace("{run_id}", quote(str(query.pop("run_id")), safe=""))
    base = str(request.scope.get("root_path") or "").rstrip("/")
    text = urlencode({k: v for k, v in query.items() if v is not None})
    return f"{base}{path}" + (f"?{text}" if text else "")


def _label(given: GivenGraph) -> str:
    """A given graph as a page names it: its name, and its version if it has one."""
    return repr(given.name) + (f" version {given.version!r}" if given.version else "")


def graphs_given(graphs: Sequence[Pregel[Any, Any, Any, Any] | GraphVersion]) -> list[GivenGraph]:
    found: list[GivenGraph] = []
    for graph in graphs:
        if isinstance(graph, GraphVersion):
            found.append(GivenGraph(graph.name, graph.version, graph.graph))
        elif isinstance(graph, Pregel):
            found.append(GivenGraph(graph.name, None, graph))
        else:
            raise ConfigurationError(
                f"create_app(graphs=...) takes compiled graphs or GraphVersions; got a "
                f"{type(graph).__name__}. Compile it with the console's saver first."
            )
    return found
