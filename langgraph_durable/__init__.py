"""langgraph-durable: LangGraph runs on Postgres that survive crashes without paying twice.

Public API; everything else lives in private modules.
"""

from langgraph_durable.checkpoint import AsyncDurablePostgresSaver, DurablePostgresSaver
from langgraph_durable.durability import Durability, with_durability
from langgraph_durable.effects import (
    AsyncEffectJournal,
    EffectJournal,
    Reconciled,
    RetryLater,
    RetryPolicy,
    current_effect_key,
    effect,
    set_default_journal,
)
from langgraph_durable.errors import (
    ConfigurationError,
    DatabaseUnreachableError,
    DurableError,
    EffectDeferred,
    EffectError,
    EffectFailedError,
    EffectInProgressError,
    EffectInputMismatchError,
    EffectOutcomeUnknown,
    InvalidInputError,
    InvalidThreadIdError,
    JournalNotFoundError,
    SchemaError,
    SchemaNotReadyError,
    SchemaTooNewError,
    TargetThreadNotEmptyError,
    UnknownPruneStrategyError,
    UnserializableValueError,
    WrongSaverClassError,
)

__all__ = [
    "AsyncDurablePostgresSaver",
    "AsyncEffectJournal",
    "ConfigurationError",
    "DatabaseUnreachableError",
    "Durability",
    "DurableError",
    "DurablePostgresSaver",
    "EffectDeferred",
    "EffectError",
    "EffectFailedError",
    "EffectInProgressError",
    "EffectInputMismatchError",
    "EffectJournal",
    "EffectOutcomeUnknown",
    "InvalidInputError",
    "InvalidThreadIdError",
    "JournalNotFoundError",
    "Reconciled",
    "RetryLater",
    "RetryPolicy",
    "SchemaError",
    "SchemaNotReadyError",
    "SchemaTooNewError",
    "TargetThreadNotEmptyError",
    "UnknownPruneStrategyError",
    "UnserializableValueError",
    "WrongSaverClassError",
    "current_effect_key",
    "effect",
    "set_default_journal",
    "with_durability",
]
