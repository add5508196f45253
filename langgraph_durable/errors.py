"""Every error a user of langgraph-durable can hit, in one small hierarchy.

Each class docstring is its default message and says what to do. Driver errors
(psycopg) are translated at one boundary, `translate_driver_error`, always with
`raise ... from exc` so the original stays visible. A named error that stands for a
driver error upstream lets through is also that driver class, so code written for
upstream (`except psycopg.OperationalError`) catches it; code of ours that catches
driver errors re-raises ours untouched.

    DurableError
    ├── ConfigurationError
    │   ├── WrongSaverClassError          (also a NotImplementedError, asyncio.InvalidStateError)
    │   ├── MissingExtraError             (also an ImportError)
    │   ├── PoolClosedError               (also a psycopg_pool.PoolClosed)
    │   └── DatabaseUnreachableError      (also a psycopg.OperationalError)
    │       ├── PoolTimeoutError          (also a psycopg_pool.PoolTimeout)
    │       │   └── PoolBusyError         (also a psycopg_pool.TooManyRequests)
    │       └── ConnectionLostError
    ├── SchemaError
    │   ├── SchemaNotReadyError           (also a psycopg.errors.UndefinedTable)
    │   └── SchemaTooNewError
    ├── InvalidInputError                 (also a ValueError)
    │   ├── InvalidThreadIdError
    │   ├── UnserializableValueError      (also a TypeError)
    │   ├── WrongArgumentTypeError        (also a TypeError)
    │   ├── TargetThreadNotEmptyError
    │   ├── UnknownPruneStrategyError
    │   ├── EffectInputMismatchError
    │   ├── InvalidDecisionError
    │   ├── InvalidEventError
    │   └── InvalidWebhookError
    ├── DatabaseTimeoutError
    │   ├── LockTimeoutError              (also a psycopg.errors.LockNotAvailable)
    │   └── StatementTimeoutError         (also a psycopg.errors.QueryCanceled)
    ├── TransactionConflictError          (also a psycopg.errors.TransactionRollback)
    ├── DatabaseResourceError             (also a psycopg.errors.InsufficientResources)
    ├── OutboxUnavailableError            (also a ConfigurationError)
    ├── OutboxRelayError
    ├── UnsafeRowError
    ├── ThreadNotFoundError
    ├── EffectNotFoundError
    ├── NotWaitingError
    ├── SideEffectBeforeInterruptError
    ├── RunError
    │   ├── FencedOutError
    │   ├── RunNotFoundError
    │   ├── RunConflictError             (also an InvalidInputError)
    │   └── ThreadBusyError
    └── EffectError
        ├── JournalNotFoundError          (also a ConfigurationError)
        ├── EffectOutcomeUnknown
        ├── EffectInProgressError
        ├── EffectDeferred
        ├── EffectFailedError
        ├── EffectResultNotStoredError
        └── NotInEffectError              (also a LookupError)

Warnings (each a `UserWarning`): `SideEffectBeforeInterruptWarning`, `EffectNameWarning`.
"""

from __future__ import annotations

import asyncio
from datetime import datetime

import psycopg
import psycopg.errors
from psycopg_pool import PoolClosed, PoolTimeout, TooManyRequests

__all__ = [
    "ConfigurationError",
    "ConnectionLostError",
    "DatabaseResourceError",
    "DatabaseTimeoutError",
    "DatabaseUnreachableError",
    "DurableError",
    "EffectDeferred",
    "EffectError",
    "EffectFailedError",
    "EffectInProgressError",
    "EffectInputMismatchError",
    "EffectNameWarning",
    "EffectOutcomeUnknown",
    "EffectResultNotStoredError",
    "FencedOutError",
    "InvalidDecisionError",
    "InvalidEventError",
    "InvalidInputError",
    "InvalidThreadIdError",
    "InvalidWebhookError",
    "JournalNotFoundError",
    "LockTimeoutError",
    "MissingExtraError",
    "NotInEffectError",
    "NotWaitingError",
    "OutboxRelayError",
    "OutboxUnavailableError",
    "PoolBusyError",
    "PoolClosedError",
    "PoolTimeoutError",
    "RunConflictError",
    "RunError",
    "RunNotFoundError",
    "SchemaError",
    "SchemaNotReadyError",
    "SchemaTooNewError",
    "SideEffectBeforeInterruptError",
    "SideEffectBeforeInterruptWarning",
    "StatementTimeoutError",
    "TargetThreadNotEmptyError",
    "ThreadBusyError",
    "TransactionConflictError",
    "UnknownPruneStrategyError",
    "UnsafeRowError",
    "UnserializableValueError",
    "WrongArgumentTypeError",
    "WrongSaverClassError",
    "translate_driver_error",
]


class DurableError(Exception):
    """A langgraph-durable operation failed.

    Where upstream's saver lets a psycopg error through, ours raises a named error that
    is also that psycopg class, or its parent (`DatabaseUnreachableError` is a
    `psycopg.OperationalError`, `PoolTimeoutError` a `psycopg_pool.PoolTimeout`,
    `SchemaNotReadyError` an `UndefinedTable`, `TransactionConflictError` a
    `TransactionRollback`, ...): an `except` clause written for upstream catches ours
    too. The README lists them.
    """

    def __init__(self, message: str | None = None) -> None:
        super().__init__(message or (type(self).__doc__ or "").strip())


class ConfigurationError(DurableError):
    """langgraph-durable is set up in a way that cannot work; see the message for the fix."""


class WrongSaverClassError(ConfigurationError, NotImplementedError, asyncio.InvalidStateError):
    """This saver class does not fit the way the graph is run.

    Use `DurablePostgresSaver` with `invoke`/`stream` and `AsyncDurablePostgresSaver` with
    `ainvoke`/`astream`. Also the classes upstream raises in its place, so handlers written
    for upstream catch it: a `NotImplementedError` (its sync saver's async methods) and an
    `asyncio.InvalidStateError` (its async saver's sync calls on the saver's own loop).
    """


class MissingExtraError(ConfigurationError, ImportError):
    """An optional dependency is not installed; the message names the extra to install."""


class DatabaseUnreachableError(ConfigurationError, psycopg.OperationalError):
    """The Postgres server cannot be reached; check the DSN, the host and that the server runs."""


class PoolTimeoutError(DatabaseUnreachableError, PoolTimeout):
    """No connection came from the pool within its timeout.

    Either the server cannot be reached (the pool could not open a connection) or every
    connection of the pool was busy; the message says which, and names the server.
    Nothing of the call was written.
    """


class PoolBusyError(PoolTimeoutError, TooManyRequests):
    """Too many calls already wait for a connection of the pool (its `max_waiting`).

    Nothing of the call was written. Give the pool more connections or a larger
    `max_waiting`, or run fewer calls at once; a graph resumes from its last committed
    checkpoint with `invoke(None, config)`.
    """


class PoolClosedError(ConfigurationError, PoolClosed):
    """The connection pool given to langgraph-durable is closed.

    Nothing of the call was written. Open the pool before the first call (`pool.open()`,
    or `with pool:`) and close it only after the last one.
    """


class ConnectionLostError(DatabaseUnreachableError):
    """The connection died during a call: the server restarted or ended the session, or the
    network dropped. A write in flight may or may not have committed; call again (a pool
    replaces its dead connections, a graph resumes with `invoke(None, config)`, a worker
    retries on its own)."""


class DatabaseTimeoutError(DurableError):
    """Postgres cancelled a statement that waited or ran too long; nothing of it was written."""


class LockTimeoutError(DatabaseTimeoutError, psycopg.errors.LockNotAvailable):
    """A statement waited longer than `lock_timeout` for a lock another session holds.

    Nothing of the call was written. Find the session holding the lock (`pg_locks` joined
    with `pg_stat_activity`: a long transaction, a migration, a `LOCK TABLE`), end it, and
    try again; pass a larger `lock_timeout=` if such waits are expected.
    """


class StatementTimeoutError(DatabaseTimeoutError, psycopg.errors.QueryCanceled):
    """A statement ran longer than `statement_timeout` and was cancelled.

    Nothing of the call was written. Try again when the server is less busy, or pass a
    larger `statement_timeout=` (maintenance calls on large threads may need one).
    """


class TransactionConflictError(DurableError, psycopg.errors.TransactionRollback):
    """Postgres aborted a transaction to break a deadlock or a serialization conflict with
    another session; that transaction was rolled back.

    Nothing is wrong with the call itself: try it again (a graph resumes with
    `invoke(None, config)`; a worker retries on its own).
    """


class DatabaseResourceError(DurableError, psycopg.errors.InsufficientResources):
    """Postgres ran out of a resource during a call (SQLSTATE class 53): disk space,
    memory, connections, or a configured limit such as `temp_file_limit`.

    The statement was rolled back: nothing of the call was written. Free the resource or
    raise the limit, then try again (a graph resumes with `invoke(None, config)`).
    """


class SchemaError(DurableError):
    """The database schema does not match this version of langgraph-durable."""


class SchemaNotReadyError(SchemaError, psycopg.errors.UndefinedTable):
    """The checkpoint tables do not exist yet: call `saver.setup()` once before using the saver."""


class SchemaTooNewError(SchemaError):
    """The database was migrated by a newer langgraph-durable; upgrade this installation."""


class InvalidInputError(DurableError, ValueError):
    """The input was rejected before anything was written; nothing stored has changed."""


class InvalidThreadIdError(InvalidInputError):
    """A thread id or namespace must be a non-empty string without NUL characters."""


class UnserializableValueError(InvalidInputError, TypeError):
    """A value could not be serialized, so nothing was written.

    Make the value serializable (plain data, pydantic models, LangChain messages) or keep it
    out of the graph state. A `TypeError` too, as upstream's serializer raises, so handlers
    written for upstream catch it.
    """


class WrongArgumentTypeError(InvalidInputError, TypeError):
    """An argument of the wrong type (one string where a list of ids goes); nothing was
    changed. A `TypeError` too, as upstream raises."""


class InvalidEventError(InvalidInputError):
    """An outbox event was refused before anything was stored.

    Give a non-empty event type, a key without NUL characters and a payload that
    `json.dumps` accepts (dicts, lists, strings, numbers, booleans, None).
    """


class InvalidWebhookError(InvalidInputError):
    """A webhook delivery failed `verify_webhook`: a header missing, a timestamp outside the
    tolerance (a replay, or a wrong clock) or a signature that does not match the body.

    Refuse the delivery (HTTP 401) and do nothing; a `ValueError`, as before it had a name.
    """


class OutboxUnavailableError(ConfigurationError):
    """`emit()` needs a node or task of a graph compiled with a durable saver.

    Compile the graph with `DurablePostgresSaver` or `AsyncDurablePostgresSaver` (after
    `setup()`), or store the event in your own transaction with `emit_txn(conn, ...)`.
    """


class OutboxRelayError(DurableError):
    """The outbox relay stopped on a database error that waiting will not cure.

    Nothing is lost: events it had not marked published stay pending and go out again,
    under the same ids, once a relay runs. The message quotes the server; fix that cause
    (a read-only server or replica, a table changed by hand, a setting of the role or
    the database) and start the relay again.
    """


class TargetThreadNotEmptyError(InvalidInputError):
    """`copy_thread` refuses to write into a thread that already has checkpoints.

    Delete the target thread first or pick a new thread id.
    """


class UnknownPruneStrategyError(InvalidInputError):
    """Unknown prune strategy: use "keep_latest" or "delete"."""


class EffectInputMismatchError(InvalidInputError):
    """The same idempotency key was used with a different input; nothing was called.

    A key names one operation: give this call its own key, or pass the original input.

    Attributes:
        key: The key, when the journal row was read.
    """

    def __init__(self, message: str | None = None, *, key: str | None = None) -> None:
        super().__init__(message)
        self.key = key


class InvalidDecisionError(InvalidInputError):
    """The approval decision is not valid; nothing was sent and the run still waits.

    Send a decision with `approved` (true/false) and a non-empty `approver`.

    Attributes:
        thread_id: The thread whose approval node refused the answer (its question still
            waits there), or None when the answer was refused before it was sent.
    """

    def __init__(self, message: str | None = None, *, thread_id: str | None = None) -> None:
        super().__init__(message)
        self.thread_id = thread_id


class UnsafeRowError(DurableError):
    """A stored value would construct a class that is not on the allow-list; not loaded.

    Nothing was imported or called. Register your own types with
    `SafeSerializer(allow=[...])`; a type you never stored means someone wrote the table.
    """


class ThreadNotFoundError(DurableError):
    """The thread (or the checkpoint of it that was named) is not in this database.

    Check the id; `langgraph-durable threads list` shows the threads there are.
    """


class EffectNotFoundError(DurableError):
    """No effect has this key in this database; `langgraph-durable effects list` shows
    the open ones, `threads history THREAD` a thread's."""


class NotWaitingError(DurableError):
    """The thread is not waiting for an approval, so there is nothing to resume.

    List waiting threads with `pending_approvals(...)`.
    """


class SideEffectBeforeInterruptError(DurableError):
    """A node performed effects and then called `interrupt()` in the same execution.

    LangGraph re-runs an interrupted node from its first line, so move the effects into
    their own node before the approval node.
    """


class SideEffectBeforeInterruptWarning(UserWarning):
    """A node performed effects before `interrupt()`; they are journaled, but move them."""


class RunError(DurableError):
    """A run could not be created, found, taken or advanced; see the message."""


class FencedOutError(RunError):
    """This writer no longer holds the thread's lease: another worker took the run over,
    or the run was cancelled, timed out or superseded by a newer run.

    Nothing was written. The process must stop working on this thread; the run's status
    in the registry says what happened to it.
    """


class RunNotFoundError(RunError):
    """No run has this id in this database."""


class RunConflictError(RunError, InvalidInputError):
    """The run request does not fit the thread's or the run's state; nothing was changed.

    A new run on a thread with an active run under multitask strategy "reject" (wait, or
    pass "enqueue", "interrupt" or "rollback"), or a retry, resume or migration of a run
    whose status does not allow it (the message names the statuses that do).
    """


class ThreadBusyError(RunError):
    """Another process holds this thread's lease; try again when it is done."""


class EffectNameWarning(UserWarning):
    """An effect's default name may differ between runs; pass `@effect(name=...)`."""


class EffectKeyWarning(UserWarning):
    """Calls of one effect with default keys come from several threads or asyncio tasks
    of one node (parallel tool calls): their keys may follow arrival order; pass `key=`."""


class EffectError(DurableError):
    """An effect could not be run or replayed; see the message for what to do."""

    def __init__(self, message: str | None = None, *, key: str | None = None) -> None:
        super().__init__(message)
        self.key = key


class JournalNotFoundError(EffectError, ConfigurationError):
    """No effect journal is available.

    Run the effect inside a graph compiled with a langgraph-durable saver, pass
    `journal=EffectJournal(...)` to `@effect`, or call `set_default_journal(...)`.
    """


class NotInEffectError(EffectError, LookupError):
    """`current_effect_key()` was called outside an `@effect` call.

    Call it from inside the function an `@effect` wraps, or declare an `idempotency_key`
    parameter there; a `LookupError`, as before it had a name.
    """


class EffectOutcomeUnknown(EffectError):
    """An earlier attempt of this effect started and never recorded an outcome.

    The receiver may or may not have acted. Check it by the effect's key, then resolve the
    journal row by hand (`EffectJournal.resolve(key, completed=...)`, `allow_retry=True` or
    `failed=...`, or `langgraph-durable resolve`) and resume with `invoke(None, config)`;
    sending the input again would start a new run with new keys. Add a `reconcile=` hook
    to do this automatically, or `retry="idempotent"` when the receiver honours the key.
    """


class EffectInProgressError(EffectError):
    """Another worker holds this effect's lease and has not finished; try again later.

    Attributes:
        lease_expires_at: When that attempt's lease runs out (the database's clock), if
            known: a run worker parks the run until then instead of using up an attempt.
    """

    def __init__(
        self,
        message: str | None = None,
        *,
        key: str | None = None,
        lease_expires_at: datetime | None = None,
    ) -> None:
        super().__init__(message, key=key)
        self.lease_expires_at = lease_expires_at


class EffectDeferred(EffectError):
    """The receiver asked to retry later (rate limit); the run should park until `retry_at`."""

    def __init__(
        self,
        message: str | None = None,
        *,
        key: str | None = None,
        retry_at: datetime | None = None,
    ) -> None:
        """`retry_at` is on the database's clock, as the journal's times and durable_sleep's
        are: a run worker stores it as the run's `retry_at` as it is."""
        super().__init__(message, key=key)
        self.retry_at = retry_at


class EffectFailedError(EffectError):
    """The effect failed terminally earlier; its journaled error is raised again on replay.

    Attributes:
        error_type: The class name of the original error.
    """

    def __init__(
        self, message: str | None = None, *, key: str | None = None, error_type: str | None = None
    ) -> None:
        super().__init__(message, key=key)
        self.error_type = error_type


class EffectResultNotStoredError(EffectError):
    """An effect acted but its result cannot be serialized, so it was not journaled.

    The attempt is journaled as unknown with this reason and is never attempted again
    without a decision: make the effect return plain data, then resolve the key
    (`EffectJournal.resolve(key, completed=...)` or `langgraph-durable resolve`).
    """


def translate_driver_error(
    exc: psycopg.Error, *, doing: str = "", timeouts: dict[str, int] | None = None
) -> DurableError | None:
    """Map a driver error to the named error a user should see, or None to re-raise as is.

    Args:
        exc: The driver's error.
        doing: What the failed call was doing ("storing a checkpoint (put)"), for messages.
        timeouts: The `lock_timeout` / `statement_timeout` (milliseconds) this library set
            on the session, if any; others come from the DSN, the role or the database.
    """
    if isinstance(exc, DurableError):
        return None  # already named (ours are also psycopg's classes): raised as it is
    if isinstance(exc, psycopg.errors.LockNotAvailable):
        return LockTimeoutError(_timeout_message(exc, "lock_timeout", doing, timeouts))
    if isinstance(exc, psycopg.errors.QueryCanceled) and "statement timeout" in str(
        exc.diag.message_primary or ""
    ):
        return StatementTimeoutError(_timeout_message(exc, "statement_timeout", doing, timeouts))
    if isinstance(exc, (psycopg.errors.DeadlockDetected, psycopg.errors.SerializationFailure)):
        kind = (
            "a deadlock"
            if isinstance(exc, psycopg.errors.DeadlockDetected)
            else "a serialization conflict"
        )
        return TransactionConflictError(
            f"Postgres aborted {doing or 'a statement'} to break {kind} with another session; "
            "its transaction was rolled back. Try again: a graph resumes with "
            "invoke(None, config), and a worker retries on its own "
            f"(server said: {exc.diag.message_primary})."
        )
    if isinstance(exc, psycopg.errors.UndefinedTable):
        return SchemaNotReadyError(
            "The checkpoint tables do not exist in this database: call `saver.setup()` "
            f"once before using the saver (server said: {exc.diag.message_primary})."
        )
    if isinstance(exc, psycopg.errors.InsufficientPrivilege):
        return ConfigurationError(
            "This database role may not do what langgraph-durable asked: the owner of the "
            "tables grants an application role what it needs with `langgraph-durable grant "
            "ROLE` (again after an upgrade that adds tables); schema changes need the owner "
            f"(server said: {exc.diag.message_primary})."
        )
    if (exc.sqlstate or "").startswith("53"):
        return DatabaseResourceError(
            f"Postgres ran out of a resource while {doing or 'running a statement'}: disk "
            "space, memory, connections or a configured limit (temp_file_limit, "
            "max_connections). The statement was rolled back, nothing of this call was "
            "written; free the resource or raise the limit and try again (a graph resumes "
            f"with invoke(None, config)) (server said: {exc.diag.message_primary})."
        )
    if isinstance(exc, psycopg.errors.ProgramLimitExceeded):
        return InvalidInputError(
            "A value is too large for the database: an id or key longer than a Postgres "
            "index entry (2,704 bytes) or a value over a server limit. Nothing was written "
            f"(server said: {exc.diag.message_primary})."
        )
    return None


def _timeout_message(
    exc: psycopg.Error, setting: str, doing: str, timeouts: dict[str, int] | None
) -> str:
    configured = (timeouts or {}).get(setting)
    limit = (
        f"the {setting} of {configured} ms set on this saver, journal or registry"
        if configured is not None
        else f"the {setting} of this session (from the DSN's options, the role or the database)"
    )
    what = doing or "a statement"
    if setting == "lock_timeout":
        return (
            f"Postgres cancelled {what}: it waited longer than {limit} for a lock another "
            "session holds on these tables. Nothing of this call was written. Find the "
            "holder (pg_locks joined with pg_stat_activity: a long transaction, a migration, "
            "a LOCK TABLE), end it and try again (a graph resumes with invoke(None, config)); "
            "pass a larger lock_timeout= if such waits are expected "
            f"(server said: {exc.diag.message_primary})."
        )
    return (
        f"Postgres cancelled {what}: it ran longer than {limit}. Nothing of this call was "
        "written. Try again when the server is less busy (a graph resumes with "
        "invoke(None, config)), or pass a larger statement_timeout= "
        f"(server said: {exc.diag.message_primary})."
    )
