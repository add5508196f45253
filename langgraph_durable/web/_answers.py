"""The console's approval routes: the inbox, a thread's questions, and answering one.

Answers go through the library's own functions: `validate_decision` (the graph's decision
model), `refusal_for` (the graph's `authorize` hook, asked before anything is sent), then
either the run registry's `aresume` (a run waits in the registry: a worker resumes it) or
`aresume_approval` under `aexclusive` (a thread run by plain `invoke`: the console runs it
on, and a second answer at once gets `ThreadBusyError`). Which of the two, or neither, is
one rule (`answered_through`), shared by the pages and `answer`. The approval node judges
the answer again when it arrives (authorize, revalidate), as for any other caller.
"""

from __future__ import annotations

import logging
from typing import Any

from langgraph.pregel import Pregel
from langgraph.types import Command
from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import Response

from langgraph_durable._db import source_of
from langgraph_durable._sql import QUERIES
from langgraph_durable.approvals import (
    ApprovalDecision,
    ApprovalHooks,
    PendingApproval,
    UnreadableQuestion,
    answer_for,
    approval_hooks,
    aresume_approval,
    asked_again,
    refusal_for,
    validate_decision,
)
from langgraph_durable.errors import (
    DatabaseUnreachableError,
    InvalidDecisionError,
    NotWaitingError,
    RunConflictError,
    ThreadBusyError,
)
from langgraph_durable.runs import Run, RunStatus
from langgraph_durable.web import _views as views
from langgraph_durable.web._console import Console
from langgraph_durable.web._forms import (
    Refused,
    decision_input,
    in_form,
    thread_field,
    thread_id_field,
)

__all__ = ["answer", "approval", "inbox"]

logger = logging.getLogger(__name__)

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
    refused: dict[str, str | None] = {}  # the authorize hook's reason, by action
    why_not: str | None
    unchecked: str | None = None
    through = await answered_through(console, pending) if pending.is_approval else None
    found = (
        await console.graph_for(pending.thread_id, through)
        if pending.is_approval and not isinstance(through, str)
        else None
    )
    if not pending.is_approval:
        why_not = "asked by a plain interrupt(), not an approval node: answer it from code"
    elif isinstance(through, str):
        why_not = through
    elif isinstance(found, str) or found is None:
        why_not = found
    else:
        why_not = None
        hooks = approval_hooks(found[0], found[1], interrupt_id=pending.interrupt_id)
        if hooks is None:
            # Asked by an approval node that is not one of the graph's own nodes (a
            # subgraph's): its hooks cannot be found from here, so the page must not say
            # "you may answer"; the node judges the answer when it resumes.
            unchecked = UNCHECKED
        if user is not None and not console.read_only:  # read-only: nobody answers here
            why_not = _judge_trials(found, pending, user, refused, hooks)
    value = pending.value if isinstance(pending.value, dict) else {"request": pending.value}
    return {
        "p": pending,
        "token": token,
        "thread": in_form(pending.thread_id),
        "request": value.get("request", value),
        "refused": value.get("refused"),
        "run": run,
        "can_answer": why_not is None,
        "why_not": why_not,
        "may": {action: refused.get(action) is None for action in ACTIONS},
        "user_refused": refused,
        "unchecked": unchecked,
    }


UNCHECKED = (
    "who may answer cannot be checked here: an approval node inside a subgraph asked it, "
    "whose hooks the console cannot reach; that node judges the answer when it resumes, "
    "and asks again if it refuses"
)
"""What the page says of a question whose approval node's hooks it cannot find."""


def _judge_trials(
    found: tuple[Pregel[Any, Any, Any, Any], Any],
    pending: PendingApproval,
    user: str,
    refused: dict[str, str | None],
    hooks: ApprovalHooks | None,
) -> str | None:
    """Ask the node's `authorize` hook about `user` approving and about rejecting (each
    reason into `refused`); return why nobody can answer here, or None.

    Approving and rejecting are judged apart: `not d.approved or ...` lets anyone reject,
    and the page shows each button the hook allows. Each trial is what the form would
    send, validated into the node's own `decision_model`, as `answer` does it: a hook
    reading a field of that model found a plain `ApprovalDecision` here (and raised),
    and a model with a required field the form does not send got buttons that each
    ended in a 400."""
    graph, state = found
    model = hooks.decision_model if hooks is not None else ApprovalDecision
    unfillable: dict[str, str] = {}
    try:
        for action in ACTIONS:
            raw = {"approved": action == "approve", "approver": user, "comment": None}
            try:
                trial = validate_decision(raw, model)
            except InvalidDecisionError as exc:
                unfillable[action] = _missing_fields(exc)
                continue
            refused[action] = refusal_for(graph, state, trial, interrupt_id=pending.interrupt_id)
    except Exception as exc:  # the graph's own hook: this question, not the page
        logger.exception("The authorize hook of thread %r raised", pending.thread_id)
        return f"cannot check who may answer: {type(exc).__name__}"
    for action, fields in unfillable.items():
        refused[action] = (
            f"its decision model {model.__name__} needs {fields}, which this page does not "
            "send: answer from code (resume_approval)"
        )
    if len(unfillable) == len(ACTIONS):
        return (
            f"nobody here: its decision model {model.__name__} needs "
            f"{next(iter(unfillable.values()))}, which this page does not send; answer it "
            "from code (resume_approval)"
        )
    return None


def _missing_fields(error: InvalidDecisionError) -> str:
    """The fields of a decision model that a validation error names, as a page says them."""
    cause = error.__cause__
    if isinstance(cause, ValidationError):
        names = sorted({".".join(str(p) for p in e["loc"]) or "decision" for e in cause.errors()})
        return ", ".join(repr(n) for n in names)
    return "fields"


BEFORE_SENDING = (
    NotWaitingError,
    InvalidDecisionError,
    ThreadBusyError,
    RunConflictError,
    DatabaseUnreachableError,
)
"""What `aresume_approval` raises before it sends an answer, or when the database went
away (which `_route` names); anything else came after the answer was taken."""

ACTIONS = ("approve", "reject")
"""What an answer does, each judged on its own by the graph's `authorize` hook."""


RETRYABLE = (RunStatus.ERROR, RunStatus.TIMEOUT, RunStatus.CANCELLED)


async def answered_through(console: Console, pending: PendingApproval) -> Run | str | None:
    """How the console answers `pending`: through the registry run it belongs to (a
    worker resumes it), None for a plain thread (the console runs it on, under
    `aexclusive`), or why it does not.

    One rule for the pages and for `answer`. The run a question belongs to is the one
    `aquestion_holder` finds, not the thread's newest run: a newer run cancelled before
    it ran does not hide the interrupted run that asked, and a thread whose newest run
    succeeded before a plain `invoke` asked again is a plain thread (whose graph is then
    found by its nodes alone, refusing to guess between several). A run of the thread on
    its way, or a run that asked and then ended (error, timeout, cancelled), keeps the
    console from answering: running the graph here would run it beside that run.
    """
    holder = await console.registry.aquestion_holder(pending.thread_id)
    if holder is not None:
        if holder.status is RunStatus.INTERRUPTED:
            return holder
        if await console.registry.alatest_checkpoint(holder) == pending.checkpoint_id:
            return f"answered: its run is {holder.status.value}"
        return (
            f"a run of the registry is on its way on this thread (run {holder.run_id}, "
            f"{holder.status.value}): wait for it"
        )
    latest = await console.latest_run(pending.thread_id)
    if (
        latest is not None
        and latest.status in RETRYABLE
        and await console.registry.alatest_checkpoint(latest) == pending.checkpoint_id
    ):
        return (
            f"its run is {latest.status.value}: retry the run (it resumes with the answer "
            "it was given) or create a new run"
        )
    return None


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
    run = await answered_through(console, asked)
    if isinstance(run, str):
        raise Refused(409, f"This cannot be answered here: {run}. Nothing was sent.")
    found = await console.graph_for(thread_id, run)
    if isinstance(found, str):
        raise Refused(
            409, f"Thread {thread_id!r} cannot be answered from here: {found}. Nothing was sent."
        )
    graph, state = found
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
    if run is not None:
        # Interrupted, and waiting at this question: a worker resumes it.
        answer_value = answer_for(state, thread_id, decision, interrupt_id=question)
        command: Command[Any] = Command(resume=answer_value)
        await console.registry.aresume(run.run_id, command, question=question)
        return console.back_to(request, "inbox", "queued")
    async with console.registry.aexclusive(thread_id) as config:
        # Read again under the lock: another answer may have won, or had its question
        # asked again, or a run of the registry started, since the page's answer came in.
        before, asked = await _same_question(console, thread_id, token)
        if await answered_through(console, asked) is not None:
            raise Refused(409, "A run of the registry started on this thread; nothing was sent.")
        try:
            await aresume_approval(
                graph, thread_id, decision, model=model, config=config, interrupt_id=question
            )
        except BEFORE_SENDING:
            raise  # nothing was sent: `_route` says why (a conflict, the database)
        except Exception as exc:  # the graph failed after taking the answer in (an effect
            # whose outcome is unknown included): the page says the answer was taken
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
