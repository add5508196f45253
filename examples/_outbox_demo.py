"""What the outbox examples share: the event to publish once more, as a relay killed
before marking it published would."""

from __future__ import annotations

import psycopg

from langgraph_durable.outbox import OutboxEvent

__all__ = ["first_event"]


def first_event(dsn: str, key: str, event_type: str) -> OutboxEvent:
    """The oldest event stored under `key` (of type `event_type`), as a relay hands it to
    its publisher."""
    with psycopg.connect(dsn) as conn:
        found = conn.execute(
            "SELECT event_id::text, key, payload FROM langgraph_durable_outbox"
            " WHERE key = %s ORDER BY seq LIMIT 1",
            (key,),
        ).fetchone()
    if found is None:
        raise SystemExit(f"no outbox event under key {key!r}: did the graph run?")
    return OutboxEvent(found[0], event_type, found[1], found[2], seq=0)
