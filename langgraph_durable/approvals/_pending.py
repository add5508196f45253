# WARNING: generated from _apending.py by tools/async_to_sync.py. DO NOT EDIT.
# Edit the async source and run `python tools/async_to_sync.py`.
"""Waiting approvals across threads, and resuming one with a decision (async source;
`_pending.py` is generated from it).

For a manager's UI or the CLI: which threads wait, for what, since when; then answer one.
"""

from __future__ import annotations

import builtins
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from langgraph.pregel import Pregel
from langgraph.types import Command
from pydantic import ValidationError

from langgraph_durable._sql import QUERIES
from langgraph_durable.approvals._node import ApprovalDecision, is_approval_payload
from langgraph_durable.checkpoint.sync import DurablePostgresSaver
from langgraph_durable.errors import InvalidDecisionError, NotWaitingError

__all__ = ["PendingApproval", "pending_approvals", "resume_approval", "validate_decision"]


@dataclass(frozen=True)
class PendingApproval:
    """One question a thread is waiting on.

    Attributes:
        thread_id: The waiting thread.
        interrupt_id: Pass it in `Command(resume={interrupt_id: answer})`.
        value: The interrupt payload (for approval nodes: `{"kind": ..., "request": ...}`).
        is_approval: Whether an `approval_node` asked it.
        waiting_since: When the thread stopped.
        age: How long it has waited, by the database clock.
    """

    thread_id: str
    checkpoint_id: str
    interrupt_id: str
    value: Any
    is_approval: bool
    waiting_since: datetime | None
    age: timedelta | None


def pending_approvals(
    saver: DurablePostgresSaver,
    *,
    thread_id: str | None = None,
    only_approvals: bool = False,
    limit: int = 100,
) -> builtins.list[PendingApproval]:
    """Threads waiting at an `interrupt()`, oldest first."""
    params = {"thread_id": thread_id, "limit": limit}
    with saver._source.connection() as conn:
        cur = conn.execute(QUERIES["pending_interrupts"], params)
        rows = cur.fetchall()
    found: builtins.list[PendingApproval] = []
    for row in rows:
        for item in saver.serde.loads_typed((row["type"], row["blob"])) or ():
            value = getattr(item, "value", item)
            approval = is_approval_payload(value)
            if only_approvals and not approval:
                continue
            since = row["waiting_since"]
            found.append(
                PendingApproval(
                    thread_id=row["thread_id"],
                    checkpoint_id=row["checkpoint_id"],
                    interrupt_id=str(getattr(item, "id", "")),
                    value=value,
                    is_approval=approval,
                    waiting_since=since,
                    age=(row["db_now"] - since) if since is not None else None,
                )
            )
    return found


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
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'decision'}: {e['msg']}" for e in exc.errors()
        )
        raise InvalidDecisionError(
            f"Invalid approval decision ({problems}). Nothing was sent; the run still waits."
        ) from exc


def resume_approval(
    graph: Pregel[Any, Any, Any, Any],
    thread_id: str,
    decision: ApprovalDecision | dict[str, Any],
    *,
    model: type[ApprovalDecision] = ApprovalDecision,
    durability: Any = None,
) -> Any:
    """Answer the approval a thread waits on and run it on; returns the run's output.

    Raises:
        InvalidDecisionError: The decision does not validate (nothing is sent).
        NotWaitingError: The thread waits for no approval.
    """
    checked = validate_decision(decision, model)
    config: Any = {"configurable": {"thread_id": thread_id}}
    state = graph.get_state(config)
    waiting = [i for i in state.interrupts if is_approval_payload(i.value)]
    if not waiting:
        raise NotWaitingError(
            f"Thread {thread_id!r} is not waiting for an approval"
            + (f" (next: {', '.join(state.next)})." if state.next else " (it has finished).")
        )
    answer = checked.model_dump()
    # With one question pending, a plain resume replaces any earlier unanswerable one (a
    # rejected answer sent straight through LangGraph stays saved as the plain resume).
    resume = answer if len(state.interrupts) == 1 else {waiting[0].id: answer}
    command: Command[Any] = Command(resume=resume)
    kwargs = {"durability": durability} if durability else {}
    return graph.invoke(command, config, **kwargs)
