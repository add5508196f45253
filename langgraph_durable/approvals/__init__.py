"""Approvals without double side effects: approval nodes, resume helpers and guards."""

from langgraph_durable.approvals._apending import apending_approvals, aresume_approval
from langgraph_durable.approvals._builder import add_approval_before
from langgraph_durable.approvals._node import (
    ApprovalDecision,
    ApprovalHooks,
    Revalidation,
    approval_node,
    validate_decision,
)
from langgraph_durable.approvals._pending import pending_approvals, resume_approval
from langgraph_durable.approvals._static import GuardFinding, check_graph
from langgraph_durable.approvals._waiting import (
    PendingApproval,
    UnreadableQuestion,
    answer_for,
    answer_from_pending,
    approval_hooks,
    approval_to_answer,
    asked_again,
    hooks_by_node,
    pending_from_rows,
    refusal_for,
    refusal_of,
    shown_from_rows,
)

__all__ = [
    "ApprovalDecision",
    "ApprovalHooks",
    "GuardFinding",
    "PendingApproval",
    "Revalidation",
    "UnreadableQuestion",
    "add_approval_before",
    "answer_for",
    "answer_from_pending",
    "apending_approvals",
    "approval_hooks",
    "approval_node",
    "approval_to_answer",
    "aresume_approval",
    "asked_again",
    "check_graph",
    "hooks_by_node",
    "pending_approvals",
    "pending_from_rows",
    "refusal_for",
    "refusal_of",
    "resume_approval",
    "shown_from_rows",
    "validate_decision",
]
