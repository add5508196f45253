"""Every error a user of langgraph-durable can hit, in one small hierarchy.

Each class docstring is its default message and says what to do. Driver errors
(psycopg) are translated at one boundary, `translate_driver_error`, always with
`raise ... from exc` so the original stays visible.

    DurableError
    ├── ConfigurationError
    │   ├── WrongSaverClassError          (also a NotImplementedError)
    │   └── DatabaseUnreachableError
    ├── SchemaError
    │   ├── SchemaNotReadyError
    │   └── SchemaTooNewError
    └── InvalidInputError                 (also a ValueError)
        ├── InvalidThreadIdError
        ├── UnserializableValueError
        ├── TargetThreadNotEmptyError
        └── UnknownPruneStrategyError
"""

from __future__ import annotations

import psycopg
import psycopg.errors

__all__ = [
    "ConfigurationError",
    "DatabaseUnreachableError",
    "DurableError",
    "InvalidInputError",
    "InvalidThreadIdError",
    "SchemaError",
    "SchemaNotReadyError",
    "SchemaTooNewError",
    "TargetThreadNotEmptyError",
    "UnknownPruneStrategyError",
    "UnserializableValueError",
    "WrongSaverClassError",
    "translate_driver_error",
]


class DurableError(Exception):
    """A langgraph-durable operation failed."""

    def __init__(self, message: str | None = None) -> None:
        super().__init__(message or (type(self).__doc__ or "").strip())


class ConfigurationError(DurableError):
    """langgraph-durable is set up in a way that cannot work; see the message for the fix."""


class WrongSaverClassError(ConfigurationError, NotImplementedError):
    """This saver class does not fit the way the graph is run.

    Use `DurablePostgresSaver` with `invoke`/`stream` and `AsyncDurablePostgresSaver` with
    `ainvoke`/`astream`.
    """


class DatabaseUnreachableError(ConfigurationError):
    """The Postgres server cannot be reached; check the DSN, the host and that the server runs."""


class SchemaError(DurableError):
    """The database schema does not match this version of langgraph-durable."""


class SchemaNotReadyError(SchemaError):
    """The checkpoint tables do not exist yet: call `saver.setup()` once before using the saver."""


class SchemaTooNewError(SchemaError):
    """The database was migrated by a newer langgraph-durable; upgrade this installation."""


class InvalidInputError(DurableError, ValueError):
    """The input was rejected before anything was written; nothing stored has changed."""


class InvalidThreadIdError(InvalidInputError):
    """A thread id or namespace must be a non-empty string without NUL characters."""


class UnserializableValueError(InvalidInputError):
    """A value could not be serialized, so nothing was written.

    Make the value serializable (plain data, pydantic models, LangChain messages) or keep it
    out of the graph state.
    """


class TargetThreadNotEmptyError(InvalidInputError):
    """`copy_thread` refuses to write into a thread that already has checkpoints.

    Delete the target thread first or pick a new thread id.
    """


class UnknownPruneStrategyError(InvalidInputError):
    """Unknown prune strategy: use "keep_latest" or "delete"."""


def translate_driver_error(exc: psycopg.Error) -> DurableError | None:
    """Map a driver error to the named error a user should see, or None to re-raise as is."""
    if isinstance(exc, psycopg.errors.UndefinedTable):
        return SchemaNotReadyError(
            "The checkpoint tables do not exist in this database: call `saver.setup()` "
            f"once before using the saver (server said: {exc.diag.message_primary})."
        )
    return None
