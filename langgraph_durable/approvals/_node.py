"""Approval nodes: a node whose only job is to ask, validate the answer and route.

Keeping the approval in a node of its own is the whole trick: LangGraph re-runs an
interrupted node from its first line, and a node that only asks has nothing to repeat.

    builder.add_node("approve_refund", approval_node(
        request=lambda s: {"order": s["order_id"], "amount": s["amount"]},
        on_approve="refund",
        on_reject="tell_customer_no",
        authorize=lambda s, d: d.approver in MANAGERS or f"{d.approver} may not approve",
        revalidate=check_order_still_refundable,
    ))

The answer is validated into an `ApprovalDecision` by `interrupt(response_schema=...)`:
an invalid resume value raises before the node acts on it, so the run stays interrupted
and the caller can answer again. An unauthorized approver, or a world that changed so much that
the request must be asked again, re-asks in the same node with the reason attached. Each
answer is judged once, in the execution it reaches the node in: when the node runs again
(another branch answered, `invoke(None)`, a recovered run), the answers it already refused
stay refused, whatever the hooks would say now. The answer's place among the task's
`interrupt()` calls is LangGraph's own count, so a node that asks something else first and
then returns the approval node's result still judges the approval's answers.
"""

from __future__ import annotations

import inspect
import weakref
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from langchain_core.runnables import RunnableConfig
from langgraph.config import get_config
from langgraph.graph import END
from langgraph.types import Command, interrupt
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from langgraph_durable._langgraph import (
    TaskAnswers,
    answers_of_task,
    drop_plain_resume,
    interrupts_asked,
    missing_state_keys,
)
from langgraph_durable.errors import ConfigurationError, InvalidDecisionError

__all__ = [
    "APPROVAL_KIND",
    "ApprovalDecision",
    "ApprovalHooks",
    "Revalidation",
    "approval_node",
    "hooks_of",
    "require_state_keys",
    "validate_decision",
]

APPROVAL_KIND = "langgraph_durable.approval"

Revalidation = Literal["proceed", "no_longer_needed", "needs_new_approval"]


class ApprovalDecision(BaseModel):
    """A person's answer to an approval request.

    Attributes:
        approved: Yes or no.
        approver: Who decided (checked by the `authorize` hook).
        comment: Optional words for the record.
        amended: Fields the approver changed (for example a lower amount).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    approved: bool
    approver: str = Field(min_length=1)
    comment: str | None = None
    amended: dict[str, Any] = Field(default_factory=dict)


@dataclass(frozen=True)
class ApprovalHooks:
    """What an `approval_node` judges answers with, for callers that check before sending.

    Attributes:
        authorize: The node's `authorize` hook, or None.
        decision_model: The model answers are validated into.
    """

    authorize: Callable[[Any, ApprovalDecision], bool | str] | None
    decision_model: type[ApprovalDecision]


_HOOKS: weakref.WeakKeyDictionary[Callable[..., Any], ApprovalHooks] = weakref.WeakKeyDictionary()


def hooks_of(node_function: Any) -> ApprovalHooks | None:
    """The hooks of a function made by `approval_node`, or None for any other function."""
    try:
        return _HOOKS.get(node_function)
    except TypeError:  # not weak-referenceable: not ours
        return None


def _answers_at_start(config: RunnableConfig) -> TaskAnswers:
    """The task's answers as this execution starts, the plain resume LangGraph hands out
    again taken away first: one equal to an answer the task holds already answered a
    question (see `drop_plain_resume`), and judging it again would judge a refused answer
    as the answer to the question asked after it."""
    task = answers_of_task(config)
    if task is None:
        return TaskAnswers([], 0, None)  # not in a graph task: interrupt() will say so
    if task.plain is not None and any(task.plain == held for held in task.answers[: task.held]):
        drop_plain_resume(config)
        return TaskAnswers(task.answers, task.held, None)
    return task


def require_state_keys(
    keys: Sequence[str], *, where: str, known: Collection[str] | None = None
) -> None:
    """Fail unless the graph's state declares `keys`: LangGraph drops updates to others."""
    missing = (
        [k for k in keys if k not in known]
        if known is not None
        else missing_state_keys(get_config(), keys)
    )
    if missing:
        names = ", ".join(repr(k) for k in missing)
        raise ConfigurationError(
            f"{where}: the graph's state has no {names}, so the decision would be dropped "
            "without a word. Add them to the state, e.g. `approval: dict` and "
            "`approval_outcome: str` in its TypedDict, or pass decision_key= and "
            "outcome_key= naming keys it has."
        )


def _problems(exc: ValidationError) -> str:
    return "; ".join(
        f"{'.'.join(str(p) for p in e['loc']) or 'decision'}: {e['msg']}" for e in exc.errors()
    )


def validate_decision(
    decision: ApprovalDecision | dict[str, Any],
    model: type[ApprovalDecision] = ApprovalDecision,
) -> ApprovalDecision:
    """Check a decision before anything is sent; `InvalidDecisionError` says what is wrong."""
    if isinstance(decision, model):
        return decision
    try:
        return model.model_validate(
            decision.model_dump() if isinstance(decision, ApprovalDecision) else decision
        )
    except ValidationError as exc:
        raise InvalidDecisionError(
            f"Invalid approval decision ({_problems(exc)}). Nothing was sent; the run still waits."
        ) from exc


def _decision(
    payload: dict[str, Any], model: type[ApprovalDecision], thread_id: str | None
) -> ApprovalDecision:
    """Ask, and validate the answer (LangGraph validates it against `model`)."""
    try:
        return interrupt(payload, response_schema=model)
    except ValidationError as exc:
        raise InvalidDecisionError(
            f"Invalid approval decision ({_problems(exc)}). The node did not act on it and the "
            "run still waits for a valid answer; send one with resume_approval(), which checks "
            "it before anything reaches the graph.",
            thread_id=thread_id,
        ) from exc


def _thread_of(config: Any) -> str | None:
    found = (config.get("configurable") or {}).get("thread_id")
    return None if found is None else str(found)


def is_async_callable(hook: Any) -> bool:
    """Whether calling `hook` returns a coroutine: an `async def`, or an object whose
    `__call__` is one."""
    return inspect.iscoroutinefunction(hook) or inspect.iscoroutinefunction(
        getattr(hook, "__call__", None)  # noqa: B004 - the method itself is what is asked
    )


def approval_node(
    request: Callable[[Any], Any],
    *,
    on_approve: str,
    on_reject: str = END,
    on_no_longer_needed: str = END,
    authorize: Callable[[Any, ApprovalDecision], bool | str] | None = None,
    revalidate: Callable[[Any, ApprovalDecision], Revalidation] | None = None,
    decision_model: type[ApprovalDecision] = ApprovalDecision,
    decision_key: str = "approval",
    outcome_key: str = "approval_outcome",
) -> Callable[[Any], Command[str]]:
    """Build a node that asks for approval and routes on the answer.

    Args:
        request: Builds the payload shown to the approver from the state.
        on_approve: The node to run when approved (and authorized, and still needed).
        on_reject: The node to run when rejected.
        on_no_longer_needed: The node to run when `revalidate` says the action is moot.
        authorize: `(state, decision) -> True | False | reason`; anything but True re-asks
            with the reason. Asked about every answer, a rejection too (`decision.approved`
            says which; `not d.approved or ...` lets anyone reject), and about the amended
            values the approval would act on (`decision.amended`).
        revalidate: `(state, decision) -> "proceed" | "no_longer_needed" |
            "needs_new_approval"`; re-reads the world before acting.
        decision_model: A subclass of `ApprovalDecision` with more fields.
        decision_key: State key that receives the decision (as a dict).
        outcome_key: State key that receives "approved", "rejected" or "no_longer_needed".

    The state must declare `decision_key` and `outcome_key` (LangGraph would drop the
    decision without a word otherwise): the node checks that each time it runs and raises
    `ConfigurationError`, and `add_approval_before` checks it at once. An answer that does
    not validate raises `InvalidDecisionError`; the node does not act on it and the run
    still waits.
    Add the node with `destinations=` or use `add_approval_before`, so graph drawings show
    the routes.
    """
    for name, hook in (("request", request), ("authorize", authorize), ("revalidate", revalidate)):
        if is_async_callable(hook):
            # An async authorize returned a coroutine, never True: everyone was refused.
            raise ConfigurationError(
                f"approval_node's {name} hook is async; approval hooks (request, authorize, "
                "revalidate) must be plain functions: LangGraph runs them inside the node, "
                "where they cannot be awaited."
            )

    def ask(state: Any) -> Command[str]:
        # Checked on every run: one node object may be added to several graphs.
        require_state_keys((decision_key, outcome_key), where="approval_node")
        config = get_config()
        task = _answers_at_start(config)
        payload: dict[str, Any] = {"kind": APPROVAL_KIND, "request": request(state)}
        while True:
            index = interrupts_asked(config)
            decision = _decision(payload, decision_model, _thread_of(config))
            judged_before = index < task.held
            if judged_before and index + 1 < len(task.answers):
                continue  # the next question has its answer: this one's reason is not shown
            route, reason = _judge(state, decision)
            if route is not None and not judged_before:
                update = {
                    decision_key: decision.model_dump(),
                    outcome_key: route[1],
                }
                return Command(goto=route[0], update=update)
            if reason is None:  # an answer refused when it came would pass now
                reason = f"{decision.approver}: refused when it came; a new approval is needed"
            payload = {"kind": APPROVAL_KIND, "request": request(state), "refused": reason}

    def _judge(state: Any, decision: ApprovalDecision) -> tuple[tuple[str, str] | None, str | None]:
        # Asked about every answer, a rejection too: who may answer is one rule, the one
        # the console asks before it sends (`refusal_for`). A hook that lets anyone
        # reject says so: `not d.approved or ...`.
        if authorize is not None:
            verdict = authorize(state, decision)
            if verdict is not True:
                reason = verdict if isinstance(verdict, str) else "approver not authorized"
                return None, f"{decision.approver}: {reason}; a new approval is needed"
        if not decision.approved:
            return (on_reject, "rejected"), None
        if revalidate is not None:
            outcome = revalidate(state, decision)
            if outcome == "no_longer_needed":
                return (on_no_longer_needed, "no_longer_needed"), None
            if outcome == "needs_new_approval":
                return None, "the request changed since it was approved; approve it again"
            if outcome != "proceed":
                raise ConfigurationError(
                    f"revalidate returned {outcome!r}; return 'proceed', 'no_longer_needed' "
                    "or 'needs_new_approval'."
                )
        return (on_approve, "approved"), None

    ask.__name__ = "approval"
    _HOOKS[ask] = ApprovalHooks(authorize=authorize, decision_model=decision_model)
    return ask


def is_approval_payload(value: Any) -> bool:
    return isinstance(value, Mapping) and value.get("kind") == APPROVAL_KIND
