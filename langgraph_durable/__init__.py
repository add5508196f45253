"""langgraph-durable: LangGraph runs on Postgres that survive crashes without paying twice.

Public API; everything else lives in private modules.
"""

from langgraph_durable.checkpoint import AsyncDurablePostgresSaver, DurablePostgresSaver
from langgraph_durable.durability import Durability, with_durability
from langgraph_durable.errors import (
    ConfigurationError,
    DatabaseUnreachableError,
    DurableError,
    InvalidInputError,
    InvalidThreadIdError,
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
    "ConfigurationError",
    "DatabaseUnreachableError",
    "Durability",
    "DurableError",
    "DurablePostgresSaver",
    "InvalidInputError",
    "InvalidThreadIdError",
    "SchemaError",
    "SchemaNotReadyError",
    "SchemaTooNewError",
    "TargetThreadNotEmptyError",
    "UnknownPruneStrategyError",
    "UnserializableValueError",
    "WrongSaverClassError",
    "with_durability",
]
