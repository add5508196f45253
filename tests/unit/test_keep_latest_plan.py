"""`keep_latest_plan`: what prune(keep_latest) keeps of each namespace, decided from the
heads alone (upstream's rules), without a database."""

from __future__ import annotations

from typing import Any

from langgraph_durable.checkpoint._retention import PrunedNamespace, keep_latest_plan


def head(
    ns: str,
    checkpoint_id: str,
    *,
    root: str | None = None,
    root_saved: bool = False,
    sends_parent: str | None = None,
    delta: tuple[str, ...] = (),
) -> dict[str, Any]:
    return {
        "checkpoint_ns": ns,
        "checkpoint_id": checkpoint_id,
        "sends_parent": sends_parent,
        "root": root,
        "root_saved": root_saved,
        "delta_channels": list(delta),
    }


def kept(heads: list[dict[str, Any]]) -> dict[str, tuple[str, ...]]:
    return {plan.checkpoint_ns: plan.kept for plan in keep_latest_plan(heads)}


def test_a_call_from_an_older_saved_root_checkpoint_has_ended() -> None:
    heads = [
        head("sub:t2", "s2", root="r2", root_saved=True),
        head("sub:t1|deep:t3", "d1", root="r1", root_saved=True),
        head("sub:t1", "s1", root="r1", root_saved=True),
        head("sub", "p1", root="r1", root_saved=True),  # checkpointer=True: no task id
        head("", "r2"),
    ]
    assert kept(heads) == {
        "sub:t2": ("s2",),  # started from the root's latest: waiting, or still running
        "sub:t1|deep:t3": (),
        "sub:t1": (),
        "sub": ("p1",),
        "": ("r2",),
    }


def test_a_call_whose_root_is_not_saved_or_unknown_is_live() -> None:
    heads = [
        head("sub:t1", "s1", root="r9", root_saved=False),  # committed before its root
        head("sub:t2", "s2"),  # no parents in its metadata
        head("", "r2"),
    ]
    assert kept(heads) == {"sub:t1": ("s1",), "sub:t2": ("s2",), "": ("r2",)}


def test_the_parent_holding_old_pending_sends_is_kept_and_so_are_its_calls() -> None:
    heads = [
        head("sub:t1", "s1", root="r1", root_saved=True),
        head("", "r2", sends_parent="r1"),
    ]
    assert kept(heads) == {"sub:t1": ("s1",), "": ("r2", "r1")}


def test_an_ended_call_keeps_no_delta_chain() -> None:
    heads = [head("sub:t1", "s1", root="r1", root_saved=True, delta=("m",)), head("", "r2")]
    assert keep_latest_plan(heads)[0] == PrunedNamespace("sub:t1", "s1", (), ())
