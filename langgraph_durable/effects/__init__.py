"""Idempotent effects: journal the key before any attempt, replay results, reconcile."""

from langgraph_durable.effects._ajournal import AsyncEffectJournal
from langgraph_durable.effects._effect import effect, set_default_journal
from langgraph_durable.effects._journal import EffectJournal
from langgraph_durable.effects._keys import current_effect_key
from langgraph_durable.effects._policy import Reconciled, RetryLater, RetryPolicy

__all__ = [
    "AsyncEffectJournal",
    "EffectJournal",
    "Reconciled",
    "RetryLater",
    "RetryPolicy",
    "current_effect_key",
    "effect",
    "set_default_journal",
]
