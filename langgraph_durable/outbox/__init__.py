"""The transactional outbox: events that commit with the step, a relay, an inbox.

- `emit(type, payload, key=...)` inside a node or `@task`: the event commits with that
  task's writes, in every durability mode (invariant I7);
- `emit_txn(conn, ...)` / `aemit_txn`: in the caller's own transaction;
- `OutboxRelay`: publishes committed events at least once, in order per key, with the
  event id as message id (publishers in `langgraph_durable.outbox.publishers`);
- `inbox_record_txn(conn, consumer, message_id)`: a consumer drops redeliveries;
- `backlog`, `events`, `replay_dead`, `prune_published`, `prune_inbox`: operations.

`_aoutbox.py` is the source of `_outbox.py` (generated).
"""

from langgraph_durable.outbox._aoutbox import (
    abacklog,
    aemit_txn,
    aevents,
    ainbox_record_txn,
    aprune_inbox,
    aprune_published,
    areplay_dead,
)
from langgraph_durable.outbox._base import (
    BrokerUnreachableError,
    OutboxEvent,
    backoff_delay,
    error_text,
    is_transport_error,
    sign_webhook,
    verify_webhook,
    webhook_key,
)
from langgraph_durable.outbox._emit import emit
from langgraph_durable.outbox._outbox import (
    backlog,
    emit_txn,
    events,
    inbox_record_txn,
    prune_inbox,
    prune_published,
    replay_dead,
)
from langgraph_durable.outbox._relay import OutboxRelay, Publisher, RoundResult
from langgraph_durable.outbox._run import run_relay

__all__ = [
    "BrokerUnreachableError",
    "OutboxEvent",
    "OutboxRelay",
    "Publisher",
    "RoundResult",
    "abacklog",
    "aemit_txn",
    "aevents",
    "ainbox_record_txn",
    "aprune_inbox",
    "aprune_published",
    "areplay_dead",
    "backlog",
    "backoff_delay",
    "emit",
    "emit_txn",
    "error_text",
    "events",
    "inbox_record_txn",
    "is_transport_error",
    "prune_inbox",
    "prune_published",
    "replay_dead",
    "run_relay",
    "sign_webhook",
    "verify_webhook",
    "webhook_key",
]
