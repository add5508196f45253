"""Idempotent effects: journal the key before any attempt, replay results, reconcile.

The `*_txn(conn, ...)` functions are the journal's writes run inside a caller's own
transaction, so that a change of one's own commits atomically with them.
"""

from langgraph_durable.effects._ajournal import (
    AsyncEffectJournal,
    aclaim_txn,
    acomplete_txn,
    afail_txn,
    amark_unknown_txn,
    arelease_txn,
    atake_over_txn,
    await_retry_txn,
)
from langgraph_durable.effects._effect import (
    ajournal_here,
    effect,
    journal_here,
    journal_of,
    set_default_journal,
)
from langgraph_durable.effects._journal import (
    EffectJournal,
    claim_txn,
    complete_txn,
    fail_txn,
    mark_unknown_txn,
    release_txn,
    take_over_txn,
    wait_retry_txn,
)
from langgraph_durable.effects._keys import current_effect_key
from langgraph_durable.effects._policy import Reconciled, RetryLater, RetryPolicy

__all__ = [
    "AsyncEffectJournal",
    "EffectJournal",
    "Reconciled",
    "RetryLater",
    "RetryPolicy",
    "aclaim_txn",
    "acomplete_txn",
    "afail_txn",
    "ajournal_here",
    "amark_unknown_txn",
    "arelease_txn",
    "atake_over_txn",
    "await_retry_txn",
    "claim_txn",
    "complete_txn",
    "current_effect_key",
    "effect",
    "fail_txn",
    "journal_here",
    "journal_of",
    "mark_unknown_txn",
    "release_txn",
    "set_default_journal",
    "take_over_txn",
    "wait_retry_txn",
]
