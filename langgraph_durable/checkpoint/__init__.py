"""The Postgres checkpointer, drop-in for langgraph-checkpoint-postgres.

`_asaver.py` is the source; `_saver.py` its generated twin. `aio` mirrors upstream's
`langgraph.checkpoint.postgres.aio`. The `*_txn` functions store a checkpoint or a task's
writes inside the caller's own transaction. Outbox events of running tasks are parked
here (`_events.py`) and stored with their tasks' writes.
"""

from langgraph_durable.checkpoint._asaver import (
    AsyncDurablePostgresSaver,
    adelete_for_runs_txn,
    aput_txn,
    aput_writes_txn,
)
from langgraph_durable.checkpoint._core import MetadataRedaction
from langgraph_durable.checkpoint._events import (
    EMPTY_EVENT_PARAMS,
    ParkedEvent,
    event_params,
    new_event,
)
from langgraph_durable.checkpoint._saver import (
    DurablePostgresSaver,
    delete_for_runs_txn,
    put_txn,
    put_writes_txn,
)

__all__ = [
    "EMPTY_EVENT_PARAMS",
    "AsyncDurablePostgresSaver",
    "DurablePostgresSaver",
    "MetadataRedaction",
    "ParkedEvent",
    "adelete_for_runs_txn",
    "aput_txn",
    "aput_writes_txn",
    "delete_for_runs_txn",
    "event_params",
    "new_event",
    "put_txn",
    "put_writes_txn",
]
