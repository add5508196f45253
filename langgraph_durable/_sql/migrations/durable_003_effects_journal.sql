-- The effect journal: one row per idempotency key, written before any attempt.
-- status: running (an attempt holds the lease), completed (result stored), failed (terminal
-- error stored), retry_wait (a retryable error; next attempt not before next_attempt_at),
-- deferred (rate limited until next_attempt_at), unknown (a lease expired without outcome).
CREATE TABLE IF NOT EXISTS langgraph_durable_effects (
    key TEXT PRIMARY KEY,
    effect_name TEXT NOT NULL,
    input_hash TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN
        ('running', 'completed', 'failed', 'retry_wait', 'deferred', 'unknown')),
    attempt INTEGER NOT NULL DEFAULT 1,
    lease_owner TEXT,
    lease_expires_at TIMESTAMPTZ,
    next_attempt_at TIMESTAMPTZ,
    result_type TEXT,
    result BYTEA,
    error_type TEXT,
    error_message TEXT,
    resolved_by TEXT,
    usage JSONB,
    replays INTEGER NOT NULL DEFAULT 0,
    thread_id TEXT,
    checkpoint_ns TEXT,
    node TEXT,
    step INTEGER,
    created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    completed_at TIMESTAMPTZ
);
CREATE INDEX IF NOT EXISTS lgd_effects_thread_idx ON langgraph_durable_effects (thread_id);
CREATE INDEX IF NOT EXISTS lgd_effects_open_idx ON langgraph_durable_effects (status, lease_expires_at)
    WHERE status IN ('running', 'unknown', 'deferred', 'retry_wait');
