"""Inserting an approval node in front of an existing node of a `StateGraph`."""

from __future__ import annotations

from typing import Any, cast

from langgraph.graph import END, StateGraph

from langgraph_durable._langgraph import nodes_going_to, reroute_edges_into
from langgraph_durable.approvals._node import approval_node, require_state_keys
from langgraph_durable.errors import ConfigurationError, InvalidInputError

__all__ = ["add_approval_before"]


def add_approval_before(
    builder: StateGraph[Any, Any, Any, Any],
    target: str,
    *,
    name: str | None = None,
    on_reject: str = END,
    on_no_longer_needed: str = END,
    **options: Any,
) -> str:
    """Add an approval node and send everything that led to `target` through it first.

    Plain edges, edges that wait for several nodes, and conditional edges with a path map
    are rewired. A node that declares it may go to `target` by `Command(goto=...)` (its
    return annotation, or `destinations=`) is refused: it would skip the approval. A
    `Send`, an undeclared `Command`, or a conditional edge without a path map cannot be
    seen: route them to the returned node name yourself.

    Args:
        builder: The graph, before `compile()`.
        target: The node that must not run without approval.
        name: The approval node's name (default `approve_<target>`).
        on_reject: Where a rejection goes.
        on_no_longer_needed: Where a moot request goes.
        **options: `request=` (required), `authorize=`, `revalidate=` and the other
            arguments of `approval_node`.

    Returns:
        The approval node's name.
    """
    if target not in builder.nodes:
        raise InvalidInputError(f"add_approval_before: there is no node {target!r} to guard.")
    if "request" not in options:
        raise InvalidInputError("add_approval_before needs request=: what the approver sees.")
    name = name or f"approve_{target}"
    if name in builder.nodes:
        raise InvalidInputError(f"add_approval_before: a node named {name!r} already exists.")
    require_state_keys(
        (options.get("decision_key", "approval"), options.get("outcome_key", "approval_outcome")),
        where="add_approval_before",
        known=builder.channels,
    )
    going = nodes_going_to(builder, target)
    if going:
        raise ConfigurationError(
            f"add_approval_before: {', '.join(map(repr, going))} may go to {target!r} by "
            f"Command(goto=...), which would skip the approval. Make them go to the "
            f"approval node instead ({name!r}; name= chooses another)."
        )
    reroute_edges_into(builder, target, name)
    node = approval_node(
        on_approve=target, on_reject=on_reject, on_no_longer_needed=on_no_longer_needed, **options
    )
    routes = (target, on_reject, on_no_longer_needed)
    builder.add_node(name, cast(Any, node), destinations=routes)
    return name
