-- The transactional outbox (invariant I7) and the inbox its consumers use.
--
-- langgraph_durable_outbox: one row per event, inserted in the transaction of the state
-- change it announces (a checkpoint or a task's writes, a caller's `emit_txn`). A relay
-- claims the oldest pending event of each key with FOR UPDATE SKIP LOCKED, publishes it
-- with `event_id` as the message id and marks it published in the same transaction.
-- `seq` orders events of one key; a row that keeps failing becomes 'dead' (replayable).
CREATE TABLE IF NOT EXISTS langgraph_durable_outbox (
    seq BIGSERIAL PRIMARY KEY,
    event_id UUID NOT NULL UNIQUE,
    event_type TEXT NOT NULL,
    key TEXT NOT NULL,
    payload JSONB NOT NULL,
    thread_id TEXT,
    task_id TEXT,
    status TEXT NOT NULL DEFAULT 'pending'
        CHECK (status IN ('pending', 'published', 'dead')),
    attempts INTEGER NOT NULL DEFAULT 0,
    next_attempt_at TIMESTAMPTZ NOT NULL DEFAULT '-infinity',
    last_error TEXT,
    created_at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp(),
    published_at TIMESTAMPTZ
);
CREATE INDEX IF NOT EXISTS lgd_outbox_pending
    ON langgraph_durable_outbox (key, seq) WHERE status = 'pending';
CREATE INDEX IF NOT EXISTS lgd_outbox_published
    ON langgraph_durable_outbox (published_at) WHERE status = 'published';

-- Relays LISTEN on this channel; identical notifications of one transaction fold into one.
CREATE OR REPLACE FUNCTION langgraph_durable_outbox_notify() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('langgraph_durable_outbox', '');
    RETURN NULL;
END
$$;
DROP TRIGGER IF EXISTS lgd_outbox_notify ON langgraph_durable_outbox;
CREATE TRIGGER lgd_outbox_notify AFTER INSERT ON langgraph_durable_outbox
    FOR EACH ROW EXECUTE FUNCTION langgraph_durable_outbox_notify();

-- langgraph_durable_inbox: message ids a consumer has acted on, recorded in the transaction
-- of its own work, so a redelivered message is dropped.
CREATE TABLE IF NOT EXISTS langgraph_durable_inbox (
    consumer TEXT NOT NULL,
    message_id TEXT NOT NULL,
    received_at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (consumer, message_id)
);
