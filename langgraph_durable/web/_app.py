"""The console's routes: read the database, call the library, render a template.

Answers go through the library's own functions: `validate_decision` (the graph's decision
model), `refusal_for` (the graph's `authorize` hook, asked before anything is sent), then
either the run registry's `aresume` (a run waits in the registry: a worker resumes it) or
`aresume_approval` under `aexclusive` (a thread run by plain `invoke`: the console runs it
on, and a second answer at once gets `ThreadBusyError`). Which of the two, or neither, is
one rule (`why_not_answerable`), shared by the pages and `answer`. The approval node judges
the answer again when it arrives (authorize, revalidate), as for any other caller.
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
from langgraph.types import Command
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Route

from langgraph_durable._db import source_of
from langgraph_durable._sql import QUERIES
from langgraph_durable.approvals import (
    ApprovalDecision,
    PendingApproval,
    answer_for,
    approval_hooks,
    aresume_approval,
    asked_again,
    refusal_for,
    validate_decision,
)
from langgraph_durable.approvals._waiting import UnreadableQuestion, hooks_by_node
from langgraph_durable.checkpoint import AsyncDurablePostgresSaver
from langgraph_durable.effects import AsyncEffectJournal, journal_of
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
from langgraph_durable.runs import AsyncRunRegistry, GraphVersion, Run, RunStatus
from langgraph_durable.serde import describing
from langgraph_durable.web import _views as views
from langgraph_durable.web._forms import (
    Refused,
    attempt_field,
    decision_input,
    json_field,
    text_field,
    thread_field,
    thread_id_field,
    thread_in_form,
)
from langgraph_durable.web._security import (
    Authenticate,
    csrf_token,
    csrf_valid,
    current_user,
    ensure_session,
    new_secret,
    set_session_cookie,
)

__all__ = ["create_app"]

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


MayResolve = Callable[[str], "bool | Awaitable[bool]"]


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

    def __post_init__(self) -> None:
        self.env = Environment(
            loader=FileSystemLoader(Path(__file__).parent / "templates"),
            autoescape=select_autoescape(default=True, default_for_string=True),
        )
        self.env.filters["redact"] = views.redacted  # every error text a page shows
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

    async def may_resolve_effects(self, user: str) -> bool:
        """Whether `may_resolve` (sync or async, as `authenticate`) lets `user` resolve."""
        if self.may_resolve is None:
            return True
        allowed = self.may_resolve(user)
        if inspect.isawaitable(allowed):
            allowed = await allowed
        return bool(allowed)

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


def _graphs(graphs: Sequence[Pregel[Any, Any, Any, Any] | GraphVersion]) -> list[GivenGraph]:
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
        for node, hooks in hooks_by_node(found[-1].graph).items():
            if inspect.iscoroutinefunction(hooks.authorize):
                # The node calls it without awaiting (a coroutine is never True: everyone
                # refused), and the console would have to guess what it says.
                raise ConfigurationError(
                    f"The authorize hook of approval node {node!r} (graph "
                    f"{found[-1].name!r}) is an async function; approval nodes call it "
                    "inside the node, where it cannot be awaited. Make it a plain function."
                )
    return found


# -- approvals -----------------------------------------------------------------------------


async def inbox(console: Console, request: Request) -> Response:
    user = await console.reader(request)
    waiting = await _questions(console, None, limit=200)
    items = [await _item(console, token, q, user) for token, q in waiting.items()]
    return await console.page(request, "inbox.html", items=items)


async def _item(
    console: Console, token: str, pending: views.Question, user: str | None
) -> dict[str, Any]:
    """One question with what the page says about it: who may answer, what runs it."""
    run = await console.latest_run(pending.thread_id)
    if isinstance(pending, UnreadableQuestion):
        logger.warning(
            "A question of thread %r cannot be loaded to be shown",
            pending.thread_id,
            exc_info=pending.error,
        )
        return {
            "p": pending,
            "token": token,
            "unreadable": views.shown_error(pending.error),
            "run": run,
            "can_answer": False,
            "why_not": "nobody here: the question cannot be read",
            "may": {},
        }
    found = await console.graph_for(pending.thread_id, run) if pending.is_approval else None
    refused: dict[str, str | None] = {}  # the authorize hook's reason, by action
    why_not: str | None
    if not pending.is_approval:
        why_not = "asked by a plain interrupt(), not an approval node: answer it from code"
    elif isinstance(found, str) or found is None:
        why_not = found
    else:
        why_not = await why_not_answerable(console, pending, run)
        if why_not is None and user is not None:
            # Approving and rejecting are judged apart: `not d.approved or ...` lets
            # anyone reject, and the page shows each button the hook allows.
            try:
                for action in ACTIONS:
                    trial = ApprovalDecision(approved=action == "approve", approver=user)
                    refused[action] = refusal_for(
                        found[0], found[1], trial, interrupt_id=pending.interrupt_id
                    )
            except Exception as exc:  # the graph's own hook: this question, not the page
                logger.exception("The authorize hook of thread %r raised", pending.thread_id)
                why_not = f"cannot check who may answer: {type(exc).__name__}"
    value = pending.value if isinstance(pending.value, dict) else {"request": pending.value}
    return {
        "p": pending,
        "token": token,
        "thread": thread_in_form(pending.thread_id),
        "request": value.get("request", value),
        "refused": value.get("refused"),
        "run": run,
        "can_answer": why_not is None,
        "why_not": why_not,
        "may": {action: refused.get(action) is None for action in ACTIONS},
        "user_refused": refused,
    }


ACTIONS = ("approve", "reject")
"""What an answer does, each judged on its own by the graph's `authorize` hook."""


RETRYABLE = (RunStatus.ERROR, RunStatus.TIMEOUT, RunStatus.CANCELLED)


async def why_not_answerable(
    console: Console, pending: PendingApproval, run: Run | None
) -> str | None:
    """Why the thread's runs keep the console from answering `pending`; None if they do not.

    One rule for the pages and for `answer`: a thread the run registry never ran (`run`,
    its latest run, is None) is a plain thread, which the console runs on under
    `aexclusive`; so is one whose latest run succeeded and did not ask the question (a
    plain `invoke` asked it since; that run can be neither retried nor resumed). Otherwise
    the thread belongs to the registry: its question is answered only through `aresume`
    of that run, which must be interrupted and have written the checkpoint the question
    waits at (the test `aresume` makes itself). Anything else is refused: running the
    graph here would run it outside the registry, beside a run that may be retried, and
    with whichever graph of that name fits, not the run's version.
    """
    if run is None:
        return None
    status = run.status.value
    if await console.registry.alatest_checkpoint(run) != pending.checkpoint_id:
        if run.status is RunStatus.SUCCESS:
            return None
        return (
            f"its thread's latest run ({status}) did not ask it, and the console answers a "
            "thread of the registry only through its run: answer it from code"
        )
    if run.status is RunStatus.INTERRUPTED:
        return None
    if run.status in RETRYABLE:
        return (
            f"its run is {status}: retry the run (it resumes with the answer it was given) "
            "or create a new run"
        )
    return f"answered: its run is {status}"


async def approval(console: Console, request: Request) -> Response:
    user = await console.reader(request)
    thread_id = thread_id_field(request.query_params.get("thread_id", ""))
    waiting = await _questions(console, thread_id) if thread_id else {}
    if not waiting:
        raise Refused(404, f"Thread {thread_id!r} is not waiting for an answer.")
    items = [await _item(console, token, q, user) for token, q in waiting.items()]
    return await console.page(request, "approval.html", items=items, thread_id=thread_id)


async def answer(console: Console, request: Request) -> Response:
    user, form = await console.actor(request)
    thread_id = thread_field(form)
    token = str(form.get("question") or "")
    raw = decision_input(user, form)
    before, asked = await _same_question(console, thread_id, token)
    run = await console.latest_run(thread_id)
    found = await console.graph_for(thread_id, run)
    if isinstance(found, str):
        raise Refused(
            409, f"Thread {thread_id!r} cannot be answered from here: {found}. Nothing was sent."
        )
    graph, state = found
    why_not = await why_not_answerable(console, asked, run)
    if why_not is not None:
        raise Refused(409, f"This cannot be answered here: {why_not}. Nothing was sent.")
    question = asked.interrupt_id
    hooks = approval_hooks(graph, state, interrupt_id=question)
    model = hooks.decision_model if hooks is not None else ApprovalDecision
    decision = validate_decision(raw, model)
    try:
        refusal = refusal_for(graph, state, decision, interrupt_id=question)
    except Exception as exc:  # the graph's own hook failed: say so, not a bare 500
        logger.exception("The authorize hook of thread %r raised", thread_id)
        raise Refused(
            500,
            f"The graph's authorize hook raised {type(exc).__name__}, so the console cannot "
            f"check whether {user} may answer this. Nothing was sent; see the server's log.",
        ) from exc
    if refusal is not None:
        raise Refused(403, f"{user} may not answer this: {refusal}. Nothing was sent.")
    if run is not None and run.status is RunStatus.INTERRUPTED:
        # Interrupted, and waiting at this question: a worker resumes it.
        answer_value = answer_for(state, thread_id, decision, interrupt_id=question)
        command: Command[Any] = Command(resume=answer_value)
        await console.registry.aresume(run.run_id, command, question=question)
        return console.back_to(request, "inbox", "queued")
    async with console.registry.aexclusive(thread_id) as config:
        # Read again under the lock: another answer may have won, or had its question
        # asked again, or a run of the registry started, since the page's answer came in.
        before, asked = await _same_question(console, thread_id, token)
        latest = await console.latest_run(thread_id)
        if latest is not None and (run is None or latest.run_id != run.run_id):
            raise Refused(409, "A run of the registry started on this thread; nothing was sent.")
        try:
            await aresume_approval(
                graph, thread_id, decision, model=model, config=config, interrupt_id=question
            )
        except DurableError:
            raise  # named errors: `_route` shows their messages (a conflict, the database)
        except Exception as exc:  # the graph failed after taking the answer in
            logger.exception("Thread %r failed after an answer from the console", thread_id)
            return await _run_failed(console, request, graph, thread_id, exc)
    # The node judged the answer again (authorize, revalidate): say what it decided.
    after = await _questions(console, thread_id)
    if asked_again(_readable(after), asked, _readable(before)):
        return console.back_to(request, "approval", "asked_again", thread_id=thread_id)
    return console.back_to(request, "inbox", "answered")


async def _run_failed(
    console: Console,
    request: Request,
    graph: Pregel[Any, Any, Any, Any],
    thread_id: str,
    error: Exception,
) -> Response:
    """The page for a plain thread whose graph, run on in this request, failed after the
    answer: the approver learns that the answer was taken and where the run stopped,
    rather than a bare 500 that reads as if nothing was sent."""
    failed = None
    try:
        state = await graph.aget_state({"configurable": {"thread_id": thread_id}})
        failed = next((t.name for t in state.tasks if t.error is not None), None)
    except Exception:  # naming the node is a courtesy: the page goes on without it
        logger.exception("Cannot read thread %r after its failure", thread_id)
    where = f"node {failed}" if failed else type(error).__name__
    message = (
        f"Your answer was recorded, then the run failed in {where}: "
        f"{views.shown_error(error)}. See where it stopped on the thread's page; once the "
        "cause is fixed, run the thread on from code."
    )
    return await console.page(
        request, "message.html", status=500, message=message, thread_id=thread_id
    )


async def _questions(
    console: Console, thread_id: str | None, *, limit: int = 100
) -> dict[str, views.Question]:
    """What waits for an answer (on `thread_id`, or on every thread), by question token.

    Read as `apending_approvals` reads it, but loaded to be shown (the serializer's
    describing twin, each row on its own): the console may run without the application's
    modules, and one row it cannot load must not hide the others. Answers are computed
    from the graph's state, loaded with the saver's own serializer."""
    query = QUERIES["pending_interrupts" if thread_id is None else "pending_interrupts_thread"]
    source = source_of(console.saver)
    async with source.connection("listing what waits for an answer (console)") as conn:
        cur = await conn.execute(query, {"thread_id": thread_id, "limit": limit})
        rows = await cur.fetchall()
    return views.questions_by_token(console.saver.serde, rows)


def _readable(questions: dict[str, views.Question]) -> list[PendingApproval]:
    return [q for q in questions.values() if isinstance(q, PendingApproval)]


async def _same_question(
    console: Console, thread_id: str, token: str
) -> tuple[dict[str, views.Question], PendingApproval]:
    """What a thread waits on, by question token, and the question under `token` (the one
    the page showed, and the one to answer), if it still waits as shown."""
    questions = await _questions(console, thread_id) if thread_id else {}
    asked = questions.get(token)
    if asked is None:
        raise Refused(
            409,
            "This question was answered, or asked again, since the page was loaded. Nothing "
            "was sent; open the inbox to see what waits now.",
        )
    if isinstance(asked, UnreadableQuestion):
        raise Refused(
            409,
            f"This question cannot be read ({views.shown_error(asked.error)}), so it cannot "
            "be answered here. Nothing was sent.",
        )
    return questions, asked


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
    await console.reader(request)
    rows = await console.journal.aopen_effects(None, 500)
    unknown = [r for r in rows if r["status"] == "unknown"]
    others = [r for r in rows if r["status"] != "unknown"]
    return await console.page(request, "effects.html", unknown=unknown, others=others)


async def resolve(console: Console, request: Request) -> Response:
    user, form = await console.actor(request)
    if not await console.may_resolve_effects(user):
        raise Refused(403, f"{user} may not resolve effects. Nothing was changed.")
    key = text_field(form, "key", "The effect key")
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
        may_resolve: `user -> bool` (may be async): who may resolve unknown effects
            (default: any signed-in user).
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
        graphs=_graphs(graphs),
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
