"""The database layer the saver, the effect journal, approvals and the CLI share.

Connections (a checked pool from a DSN, or a caller's pool or connection, lent one call at
a time with driver errors named at one boundary), a retry after a lost connection,
migrations under an advisory lock, lease owners, and the heartbeat that keeps a lease.
Other packages import from here, never from the private modules behind it.
"""

from langgraph_durable._db._amigrate import acheck_schema, amigrate
from langgraph_durable._db._asource import (
    AsyncConn,
    AsyncConnectionSource,
    aopen_pool,
    aretry_on_disconnect,
)
from langgraph_durable._db._migrate import check_schema, migrate
from langgraph_durable._db._source import (
    Conn,
    ConnectionSource,
    open_pool,
    retry_on_disconnect,
)
from langgraph_durable._db.arrays import BytesArray, IntArray, TextArray
from langgraph_durable._db.connections import (
    CONNECTION_KWARGS,
    Timeout,
    cannot_connect,
    check_dsn,
    describe_dsn,
    from_our_connections,
    is_disconnect,
    timeout_settings,
)
from langgraph_durable._db.heartbeat import AsyncHeartbeat, Heartbeat
from langgraph_durable._db.leases import owner_is_dead, process_owner
from langgraph_durable._db.registry import register_source, source_of
from langgraph_durable._db.schema import DURABLE_SCHEMA_VERSION
from langgraph_durable._db.uninterrupted import afinish_despite_cancel, finish_despite_interrupt

__all__ = [
    "CONNECTION_KWARGS",
    "DURABLE_SCHEMA_VERSION",
    "AsyncConn",
    "AsyncConnectionSource",
    "AsyncHeartbeat",
    "BytesArray",
    "Conn",
    "ConnectionSource",
    "Heartbeat",
    "IntArray",
    "TextArray",
    "Timeout",
    "acheck_schema",
    "afinish_despite_cancel",
    "amigrate",
    "aopen_pool",
    "aretry_on_disconnect",
    "cannot_connect",
    "check_dsn",
    "check_schema",
    "describe_dsn",
    "finish_despite_interrupt",
    "from_our_connections",
    "is_disconnect",
    "migrate",
    "open_pool",
    "owner_is_dead",
    "process_owner",
    "register_source",
    "retry_on_disconnect",
    "source_of",
    "timeout_settings",
]
