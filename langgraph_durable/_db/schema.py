"""Facts about the schema both migration flavours share: versions and what to tell users."""

from __future__ import annotations

from langgraph_durable._sql import MIGRATIONS
from langgraph_durable.errors import SchemaNotReadyError, SchemaTooNewError

__all__ = [
    "DURABLE_SCHEMA_VERSION",
    "LOCK_WAIT_MS",
    "UPSTREAM_SCHEMA_VERSION",
    "check_versions",
    "not_ready_upstream_only",
    "too_new",
]

DURABLE_SCHEMA_VERSION = max(m.version for m in MIGRATIONS if m.series == "durable")
"""The newest langgraph-durable migration this installation knows."""

UPSTREAM_SCHEMA_VERSION = max(m.version for m in MIGRATIONS if m.series == "upstream")
"""The newest langgraph-checkpoint-postgres migration this installation applies."""

LOCK_WAIT_MS = 250
"""How long one try of a migration waits for a table lock before it rolls back and tries
again: at most what it holds up the other sessions of its tables for, at a time."""


def too_new(found: int) -> SchemaTooNewError:
    return SchemaTooNewError(
        f"This database is at langgraph-durable schema version {found}, but this "
        f"installation knows only up to {DURABLE_SCHEMA_VERSION}. Upgrade langgraph-durable; "
        "older code must not write to a newer schema."
    )


def check_versions(durable: int) -> None:
    """Raise unless the recorded version is the one this installation expects."""
    if durable > DURABLE_SCHEMA_VERSION:
        raise too_new(durable)
    if durable < DURABLE_SCHEMA_VERSION:
        raise SchemaNotReadyError(
            f"The schema is at version {durable} of {DURABLE_SCHEMA_VERSION}: call "
            "`saver.setup()` to apply the missing migrations."
        )


def not_ready_upstream_only() -> SchemaNotReadyError:
    return SchemaNotReadyError(
        "The checkpoint tables were created by langgraph-checkpoint-postgres; call "
        "`saver.setup()` once to add langgraph-durable's tables and indexes and set the value "
        "columns' compression (no stored data changes)."
    )
