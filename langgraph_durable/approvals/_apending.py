"""Waiting approvals across threads, and answering one.

Async source: the sync twin is generated from this file.

For a manager's UI or the CLI: which threads wait, for what, since when; then answer one.
Only I/O lives here: the types and decisions are in `_waiting.py` and `_node.py`.
"""

from __future__ import annotations

import builtins
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.pregel import Pregel
from langgraph.types import Command

from langgraph_durable._db import source_of
from langgraph_durable._fencing import fence_of
from langgraph_durable._sql import QUERIES
from langgraph_durable.approvals._node import ApprovalDecision, validate_decision
from langgraph_durable.approvals._waiting import (
    PendingApproval,
    answer_for,
    pending_from_rows,
    wrong_saver,
)
from langgraph_durable.checkpoint import AsyncDurablePostgresSaver
from langgraph_durable.errors import RunConflictError

__all__ = ["apending_approvals", "aresume_approval"]


async def apending_approvals(
    saver: AsyncDurablePostgresSaver,
    *,
    thread_id: str | None = None,
    only_approvals: bool = False,
    limit: int = 100,
) -> builtins.list[PendingApproval]:
    """Threads waiting at an `interrupt()`, oldest first."""
    source = source_of(saver)
    if not isinstance(saver, AsyncDurablePostgresSaver) or source is None:
        raise wrong_saver(saver)
    params = {"thread_id": thread_id, "limit": limit}
    query = QUERIES["pending_interrupts" if thread_id is None else "pending_interrupts_thread"]
    async with source.connection("listing pending approvals") as conn:
        cur = await conn.execute(query, params)
        rows = await cur.fetchall()
    return pending_from_rows(saver.serde, rows, only_approvals=only_approvals)


async def aresume_approval(
    graph: Pregel[Any, Any, Any, Any],
    thread_id: str,
    decision: ApprovalDecision | dict[str, Any],
    *,
    model: type[ApprovalDecision] = ApprovalDecision,
    durability: Any = None,
    config: RunnableConfig | None = None,
    interrupt_id: str | None = None,
    lease_seconds: float = 300.0,
) -> Any:
    """Answer the approval a thread waits on and run it on; returns the run's output.

    `config` is the config to run with (for example the one `exclusive()` yields); its
    thread id must be `thread_id`. A thread waiting on several approvals at once is
    answered on the first that `pending_approvals` lists, or on the one asked under
    `interrupt_id` (a `PendingApproval.interrupt_id`).

    Without a lease in `config`, a graph on our saver is answered under the thread's
    lease (`exclusive()`, held `lease_seconds`): two people answering at once would both
    see the question waiting and both run the approved node. The second gets
    `ThreadBusyError`, and once the first is done the question no longer waits.

    Raises:
        InvalidDecisionError: The decision does not validate (nothing is sent).
        NotWaitingError: The thread waits for no approval (or does not exist), or no
            longer on `interrupt_id`.
        ThreadBusyError: Another process holds the thread (another answer, a worker).
    """
    checked = validate_decision(decision, model)
    given: Any = config or {}
    run_config: Any = {
        **given,
        "configurable": {**given.get("configurable", {}), "thread_id": thread_id},
    }
    saver = graph.checkpointer
    if fence_of(run_config) is not None or not isinstance(saver, AsyncDurablePostgresSaver):
        return await _aanswer(graph, thread_id, checked, run_config, durability, interrupt_id)
    # Imported here: the run registry imports this package.
    from langgraph_durable.runs import AsyncRunRegistry

    registry = AsyncRunRegistry(saver)
    async with registry.aexclusive(thread_id, lease_seconds=lease_seconds) as leased:
        fenced = {
            **run_config,
            "configurable": {**run_config["configurable"], **leased["configurable"]},
        }
        # A question a run of the registry asked is that run's to go on with: answered
        # here, the graph ran in this process while the run stayed `interrupted` for good
        # (and could no longer be resumed).
        holder = await registry.aquestion_holder(thread_id)
        if holder is not None:
            raise RunConflictError(
                f"Thread {thread_id!r} belongs to run {holder.run_id} of the run registry "
                f"({holder.status.value}): answer it through the run, "
                f"`runs.resume({holder.run_id!r}, Command(resume=answer))` (as the console "
                "and `langgraph-durable approvals approve` without --graph do), so that a "
                "worker goes on with it and the run records how it ends. Nothing was sent."
            )
        return await _aanswer(graph, thread_id, checked, fenced, durability, interrupt_id)


async def _aanswer(
    graph: Pregel[Any, Any, Any, Any],
    thread_id: str,
    decision: ApprovalDecision,
    run_config: Any,
    durability: Any,
    interrupt_id: str | None,
) -> Any:
    """Read what the thread waits on and send the answer (under the caller's lease)."""
    state = await graph.aget_state(run_config)
    answer = answer_for(state, thread_id, decision, interrupt_id=interrupt_id)
    command: Command[Any] = Command(resume=answer)
    kwargs = {"durability": durability} if durability else {}
    return await graph.ainvoke(command, run_config, **kwargs)
