"""`keep_latest_plan`: what prune(keep_latest) keeps of each namespace, decided from the
heads alone (upstream's rules), without a database."""

from __future__ import annotations

from typing import Any

from langgraph_durable.checkpoint._retention import keep_latest_plan


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


def test_the_parent_holding_old_pending_sends_is_kept() -> None:
    heads = [head("sub:t1", "s1"), head("", "r2", sends_parent="r1")]
    assert kept(heads) == {"sub:t1": ("s1",), "": ("r2", "r1")}
