"""What waits for an answer, and which answer to send: pure, shared by both flavours.

`_apending.py` (and its generated twin `_pending.py`) only read rows and call the graph;
everything here is defined once, so both flavours return the very same types.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.types import Interrupt, PregelTask, StateSnapshot

from langgraph_durable.approvals._node import (
    ApprovalDecision,
    ApprovalHooks,
    hooks_of,
    is_approval_payload,
)
from langgraph_durable.errors import NotWaitingError, WrongSaverClassError
from langgraph_durable.serde import STORED_CLASS, describing

__all__ = [
    "PendingApproval",
    "UnreadableQuestion",
    "answer_for",
    "answer_from_pending",
    "approval_hooks",
    "approval_to_answer",
    "asked_again",
    "hooks_by_node",
    "pending_from_rows",
    "refusal_for",
    "refusal_of",
    "shown_from_rows",
    "waiting_approval",
    "wrong_saver",
]


@dataclass(frozen=True)
class PendingApproval:
    """One question a thread is waiting on.

    Attributes:
        thread_id: The waiting thread.
        checkpoint_id: The checkpoint the thread waits at.
        interrupt_id: Pass it in `Command(resume={interrupt_id: answer})`.
        task_id: The task that asked. A node that asks again (an approval node refusing an
            answer) asks in the same task, under a new interrupt id.
        value: The interrupt payload (for approval nodes: `{"kind": ..., "request": ...}`).
        is_approval: Whether an `approval_node` asked it.
        waiting_since: When the thread stopped.
        age: How long it has waited, by the database clock.
    """

    thread_id: str
    checkpoint_id: str
    interrupt_id: str
    task_id: str
    value: Any
    is_approval: bool
    waiting_since: datetime | None
    age: timedelta | None


def pending_from_rows(
    serde: SerializerProtocol, rows: Iterable[Mapping[str, Any]], *, only_approvals: bool
) -> list[PendingApproval]:
    """The questions in `pending_interrupts` rows, oldest first."""
    found: list[PendingApproval] = []
    for row in rows:
        asked = _questions_of_row(serde, row)
        found.extend(p for p in asked if p.is_approval or not only_approvals)
    return found


@dataclass(frozen=True)
class UnreadableQuestion:
    """A stored question that cannot be loaded even to be shown (a cipher key this process
    lacks, a damaged row): a page lists it with the reason instead of failing whole.

    Attributes:
        thread_id, checkpoint_id, task_id, waiting_since, age: As for `PendingApproval`.
        error: Why the row could not be loaded.
    """

    thread_id: str
    checkpoint_id: str
    task_id: str
    waiting_since: datetime | None
    age: timedelta | None
    error: Exception


def shown_from_rows(
    serde: SerializerProtocol, rows: Iterable[Mapping[str, Any]]
) -> list[tuple[Mapping[str, Any], PendingApproval | UnreadableQuestion]]:
    """The questions in `pending_interrupts` rows as a page shows them, each with its row.

    Loaded with `serde`'s describing twin (`serde.describing`): a value of the
    application's own types is shown as its stored fields, so a reader without the
    application's modules (the console, the CLI) still lists it. Each row on its own: one
    that cannot be loaded at all is an `UnreadableQuestion`, and the others are listed.
    Only for showing, and for telling questions apart: the values are not the stored
    ones, so an answer is computed from the graph's state, loaded with the saver's own.
    """
    showing = describing(serde)
    found: list[tuple[Mapping[str, Any], PendingApproval | UnreadableQuestion]] = []
    for row in rows:
        try:
            found.extend((row, question) for question in _questions_of_row(showing, row))
        except Exception as exc:  # one row, not the page: say why it is not shown
            unreadable = UnreadableQuestion(
                thread_id=row["thread_id"],
                checkpoint_id=row["checkpoint_id"],
                task_id=row["task_id"],
                waiting_since=row["waiting_since"],
                age=_age(row),
                error=exc,
            )
            found.append((row, unreadable))
    return found


def _questions_of_row(serde: SerializerProtocol, row: Mapping[str, Any]) -> list[PendingApproval]:
    """The questions of one `pending_interrupts` row (one task's `__interrupt__` write)."""
    found: list[PendingApproval] = []
    for item in serde.loads_typed((row["type"], row["blob"])) or ():
        interrupt_id, value = _interrupt_parts(item)
        found.append(
            PendingApproval(
                thread_id=row["thread_id"],
                checkpoint_id=row["checkpoint_id"],
                interrupt_id=interrupt_id,
                task_id=row["task_id"],
                value=value,
                is_approval=is_approval_payload(value),
                waiting_since=row["waiting_since"],
                age=_age(row),
            )
        )
    return found


_DESCRIBED_INTERRUPT = f"{Interrupt.__module__}.{Interrupt.__qualname__}"


def _interrupt_parts(item: Any) -> tuple[str, Any]:
    """The id and value of one stored interrupt. The describing serializer shows a custom
    value holding one it may not build as its stored fields, the `Interrupt` around a
    value of the application's own types included: its fields are its id and value."""
    if isinstance(item, Mapping) and item.get(STORED_CLASS) == _DESCRIBED_INTERRUPT:
        return str(item.get("id", "")), item.get("value")
    return str(getattr(item, "id", "")), getattr(item, "value", item)


def _age(row: Mapping[str, Any]) -> timedelta | None:
    """How long a row's thread has waited, by the database's clock."""
    since = row["waiting_since"]
    return (row["db_now"] - since) if since is not None else None


def waiting_approval(
    state: StateSnapshot, interrupt_id: str | None = None
) -> tuple[PregelTask, Interrupt] | None:
    """The approval question an answer to `state` goes to, with the task that asked it.

    The one asked under `interrupt_id`; without one, the first by task id, the order in
    which `pending_approvals` lists a thread's questions and `answer_from_pending` picks
    (LangGraph's own `state.interrupts` follows its tasks, not their ids). None when no
    such approval waits.
    """
    for task, asked in _approvals_by_task(state):
        if interrupt_id in (None, asked.id):
            return task, asked
    return None


def _approvals_by_task(state: StateSnapshot) -> Iterator[tuple[PregelTask, Interrupt]]:
    """The approval questions `state` waits on, with their tasks, by task id."""
    for task in sorted(state.tasks, key=lambda task: task.id):
        for asked in task.interrupts:
            if is_approval_payload(asked.value):
                yield task, asked


def answer_for(
    state: StateSnapshot,
    thread_id: str,
    decision: ApprovalDecision,
    *,
    interrupt_id: str | None = None,
) -> Any:
    """The resume value that answers the approval `state` waits on (the one asked under
    `interrupt_id`, if given; see `waiting_approval`).

    Raises:
        NotWaitingError: The thread does not exist, has finished, waits for something
            other than an approval, or no longer waits on `interrupt_id`.
    """
    found = waiting_approval(state, interrupt_id)
    if found is None:
        if interrupt_id is not None and waiting_approval(state) is not None:
            waiting = (asked.id for _, asked in _approvals_by_task(state))
            reason = (
                f"no approval waits under interrupt id {interrupt_id!r}{_waiting_ids(waiting)}"
                ": the id is wrong, or the question was answered or asked again since it "
                "was listed. List the thread's pending approvals again"
            )
        elif state.created_at is None:
            reason = (
                "it has no checkpoints: it never ran with this checkpointer, or it was "
                "deleted. Check the thread id and the database"
            )
        elif state.next:
            reason = f"it is not at an approval (next: {', '.join(state.next)})"
        else:
            reason = "it has finished"
        raise NotWaitingError(f"Thread {thread_id!r} is not waiting for an approval: {reason}.")
    asked = found[1]
    return _resume_value(decision, asked.id, asked.value, only=len(state.interrupts) == 1)


def _resume_value(
    decision: ApprovalDecision, interrupt_id: str, question: Any, *, only: bool
) -> Any:
    """The resume value that gives `decision` to the question asked under `interrupt_id`.

    A plain resume when it is the thread's only question, asked the first time: it
    replaces an earlier plain resume that could not be used (one that did not validate,
    sent straight through LangGraph, stays saved as the plain resume). By id otherwise:
    with several questions LangGraph needs it, and on a question asked again a plain answer
    equal to the refused one is taken for LangGraph handing the refused one out again
    (`approval_node`), so an approver who may now approve could not answer the same again.
    """
    answer = decision.model_dump()
    again = isinstance(question, Mapping) and bool(question.get("refused"))
    return answer if only and not again else {interrupt_id: answer}


def approval_to_answer(
    pending: Sequence[PendingApproval],
    thread_id: str,
    *,
    interrupt_id: str | None = None,
) -> PendingApproval:
    """The approval among a thread's `pending` questions (what `pending_approvals(saver,
    thread_id=...)` returned) that an answer goes to: the one asked under `interrupt_id`,
    else the first listed.

    Raises:
        NotWaitingError: None of the questions is an approval (asked under `interrupt_id`).
    """
    for p in pending:
        if p.thread_id == thread_id and p.is_approval and interrupt_id in (None, p.interrupt_id):
            return p
    if interrupt_id is None:
        plain = [p.interrupt_id for p in pending if p.thread_id == thread_id]
        if plain:  # listed by `approvals list`, as every question a thread waits on is
            raise NotWaitingError(
                f"Thread {thread_id!r} waits at an interrupt() that asks something other "
                f"than an approval (interrupt id {plain[0]!r}), which an approval cannot "
                "answer: answer it with the value its node expects (`langgraph-durable "
                "runs resume RUN_ID --value JSON`, or invoke(Command(resume=...), config))."
            )
        raise NotWaitingError(
            f"Thread {thread_id!r} is not waiting for an approval (`approvals list` shows "
            "the threads that are, and their questions' ids)."
        )
    waiting = (p.interrupt_id for p in pending if p.is_approval and p.thread_id == thread_id)
    raise NotWaitingError(
        f"Thread {thread_id!r} has no approval waiting under interrupt id {interrupt_id!r}"
        f"{_waiting_ids(waiting)}: the id is "
        "wrong, or the question was answered or asked again since it was listed (`approvals "
        "list` shows what waits now)."
    )


def answer_from_pending(
    pending: Sequence[PendingApproval],
    thread_id: str,
    decision: ApprovalDecision,
    *,
    interrupt_id: str | None = None,
) -> Any:
    """The resume value that answers the approval among a thread's `pending` questions
    (see `approval_to_answer`), as `answer_for` does from the graph's state: for a caller
    without the graph, e.g. one that queues the answer for a worker with
    `RunRegistry.resume`.

    Raises:
        NotWaitingError: None of the questions is an approval (asked under `interrupt_id`).
    """
    chosen = approval_to_answer(pending, thread_id, interrupt_id=interrupt_id)
    asked = [p for p in pending if p.thread_id == thread_id]
    return _resume_value(decision, chosen.interrupt_id, chosen.value, only=len(asked) == 1)


def asked_again(
    after: Iterable[PendingApproval],
    answered: PendingApproval,
    before: Iterable[PendingApproval] = (),
) -> PendingApproval | None:
    """The question an answer went to, if its node refused the answer and asked again:
    among `after` (what the thread waits on once the answer was sent), a question of the
    answered task at the same checkpoint, under an interrupt id that did not wait `before`
    the answer was sent (pass what waited then: without it, a question asked again
    meanwhile by another answer is taken for this one), that carries the node's reason
    (`refused`: an approver `authorize` refused, a request that changed). None when the
    answer went through.

    The task alone does not tell: a subgraph's questions all share the parent graph's task,
    so a question that waited beside the answered one (refused earlier or not) has that
    task too, and so has a different question the node asks next, which carries no reason.
    """
    waited = {p.interrupt_id for p in before}
    for p in after:
        if (
            (p.thread_id, p.checkpoint_id, p.task_id)
            == (answered.thread_id, answered.checkpoint_id, answered.task_id)
            and p.interrupt_id not in waited
            and refusal_of(p) is not None
        ):
            return p
    return None


def refusal_of(question: PendingApproval) -> str | None:
    """Why an approval node asks `question` again (its `refused` reason), or None for a
    question asked the first time."""
    value = question.value
    reason = value.get("refused") if isinstance(value, Mapping) else None
    return str(reason) if reason else None


def _waiting_ids(ids: Iterable[str]) -> str:
    """` (waiting: 'a', 'b')` for an error message, or `` when none waits."""
    listed = [repr(i) for i in ids]
    return f" (waiting: {', '.join(listed)})" if listed else ""


def approval_hooks(
    graph: Any, state: StateSnapshot, *, interrupt_id: str | None = None
) -> ApprovalHooks | None:
    """The hooks of the `approval_node` whose question an answer goes to (the one asked
    under `interrupt_id`, if given; see `waiting_approval`), or None.

    None when that question was asked by no approval node, or `graph` (a compiled
    `StateGraph`) has no node of that name made by `approval_node`: also when a subgraph's
    node asked it, whose hooks are not in `graph`'s own builder (the node still judges the
    answer when it resumes).
    """
    found = waiting_approval(state, interrupt_id)
    return None if found is None else hooks_by_node(graph).get(found[0].name)


def hooks_by_node(graph: Any) -> dict[str, ApprovalHooks]:
    """The nodes of `graph`'s own builder made by `approval_node`, with their hooks (none
    for a graph that is not a compiled `StateGraph`)."""
    nodes = getattr(getattr(graph, "builder", None), "nodes", None)
    if not isinstance(nodes, Mapping):
        return {}
    found: dict[str, ApprovalHooks] = {}
    for name, spec in nodes.items():
        runnable = getattr(spec, "runnable", spec)
        hooks = hooks_of(getattr(runnable, "func", runnable))
        if hooks is not None:
            found[name] = hooks
    return found


def refusal_for(
    graph: Any,
    state: StateSnapshot,
    decision: ApprovalDecision,
    *,
    interrupt_id: str | None = None,
) -> str | None:
    """Why the waiting approval node's `authorize` hook refuses `decision`; None if it does not.

    The very hook the node runs when the answer arrives, asked the same way (about every
    answer, approve or reject) before anything is sent, so a console can refuse an
    approver at once. Without an `authorize` hook every approver is accepted.
    """
    hooks = approval_hooks(graph, state, interrupt_id=interrupt_id)
    if hooks is None or hooks.authorize is None:
        return None
    verdict = hooks.authorize(state.values, decision)
    if verdict is True:
        return None
    return verdict if isinstance(verdict, str) else "approver not authorized"


def wrong_saver(saver: object) -> WrongSaverClassError:
    """The error for asking a saver that is not ours (or of the other kind) what waits."""
    return WrongSaverClassError(
        f"Pending approvals are read from langgraph-durable's own tables; got a "
        f"{type(saver).__name__}. Use pending_approvals with a DurablePostgresSaver, or "
        "apending_approvals with an AsyncDurablePostgresSaver, on the same database."
    )
