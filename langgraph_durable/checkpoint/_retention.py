"""What deleting a thread may not take with it, and how a refusal reads: pure.

`delete_thread`, `prune(strategy="delete")` and `delete_idle_threads` delete a thread's
checkpoints with the journal rows of its finished effects whose keys were derived from it
(default keys), so a thread id used again acts again; business-keyed rows (`key=`) stay,
since other threads may share the key and replay it. Work in flight on a thread keeps it
whole: a run that is pending, running, deferred or blocked (each can be cancelled), an
effect whose outcome is open (running, unknown: its receiver may have acted, and only its
row says so; a deferred or retry_wait one sent nothing, and goes), or a live thread lease.
An interrupted run does not keep a thread from an explicit delete: its question dies with
the thread (and one superseded by a newer run can be neither resumed nor cancelled).
Retention also keeps a thread with an interrupted run, a checkpoint newer than its
cutoff, or one waiting at an interrupt. The `delete_threads` statement judges each thread
in the transaction that deletes it; these helpers read its rows.

`prune(strategy="keep_latest")` keeps what upstream's keeps (`keep_latest_plan`): each
namespace's latest checkpoint, with the parent a checkpoint older than format v4 reads its
pending sends from; a subgraph call's namespace goes whole once the root checkpoint it
started from is saved and no longer kept (a call from the kept root checkpoint, such as
one waiting at an interrupt, keeps its latest, as does a `checkpointer=True` subgraph).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from langgraph_durable.errors import ThreadBusyError

__all__ = ["PrunedNamespace", "keep_latest_plan", "kept_reasons", "refuse_busy"]


@dataclass(frozen=True)
class PrunedNamespace:
    """What keep_latest does to one namespace of a thread.

    Attributes:
        checkpoint_ns: The namespace.
        head: Its latest checkpoint when the heads were read: nothing newer is touched, so
            a run committing meanwhile keeps what it commits.
        kept: The head and the parent it reads pending sends from (if any); empty for an
            ended subgraph call, which keeps nothing up to its head.
        delta_channels: Channels whose values a `DeltaChannel` rebuilds from the head's
            ancestors, which are kept too.
    """

    checkpoint_ns: str
    head: str
    kept: tuple[str, ...]
    delta_channels: tuple[str, ...]


def keep_latest_plan(heads: Sequence[Mapping[str, Any]]) -> list[PrunedNamespace]:
    """What keep_latest does to each namespace, from the `thread_heads` rows of a thread.

    A subgraph call's namespace has the task id of the call after a ":" (a
    `checkpointer=True` subgraph's has none: its state outlives each call). The call has
    ended once the root checkpoint it started from is saved and is not one the root keeps;
    until its root is saved (runs save in the background) it is treated as live.
    """
    root_kept: set[str] = set()
    for head in heads:
        if head["checkpoint_ns"] == "":
            root_kept = {i for i in (head["checkpoint_id"], head["sends_parent"]) if i}
    plans: list[PrunedNamespace] = []
    for head in heads:
        namespace = head["checkpoint_ns"]
        ended = ":" in namespace and head["root_saved"] and head["root"] not in root_kept
        plans.append(
            PrunedNamespace(
                checkpoint_ns=namespace,
                head=head["checkpoint_id"],
                kept=()
                if ended
                else tuple(i for i in (head["checkpoint_id"], head["sends_parent"]) if i),
                delta_channels=() if ended else tuple(head["delta_channels"]),
            )
        )
    return plans


def kept_reasons(row: Mapping[str, Any]) -> list[str]:
    """Why `delete_threads` kept a thread, in words (empty: it was not kept for a reason)."""
    reasons: list[str] = []
    if row["open_runs"]:
        reasons.append(f"unfinished runs {', '.join(row['open_runs'])}")
    if row["open_effects"]:
        reasons.append(f"effects with an open outcome {', '.join(row['open_effects'])}")
    if row["leased"]:
        reasons.append("a live thread lease (a worker or `exclusive()` holds it)")
    if row.get("recent"):
        reasons.append("a checkpoint newer than the cutoff")
    if row.get("waiting"):
        reasons.append("it waits at an interrupt")
    return reasons


def refuse_busy(rows: Sequence[Mapping[str, Any]]) -> None:
    """Raise when `delete_threads` (all or none) kept the threads: say why, and what to do.
    Only the threads with work in flight are named: the others were kept only because
    they went with them.

    Raises:
        ThreadBusyError: A thread had work in flight; none of the threads was deleted.
    """
    if all(row["deleted"] for row in rows):
        return
    busy = [(row["thread_id"], why) for row in rows if (why := kept_reasons(row))]
    said = "; ".join(f"thread {thread!r}: {', '.join(why)}" for thread, why in busy)
    raise ThreadBusyError(
        f"Not deleted, work is in flight ({said}). Let the runs finish or cancel them "
        "(`langgraph-durable runs cancel RUN_ID`); let running effects end, and resolve "
        "unknown ones (and running ones whose lease lapsed) once you have checked the "
        "receiver (`langgraph-durable resolve KEY --completed JSON | --allow-retry | "
        "--failed REASON`); a lease goes when its worker or `exclusive()` lets go. Then "
        "delete again. Nothing was deleted."
    )
