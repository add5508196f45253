-- The canonical schema: what all migrations in migrations/ produce, in one file, for a DBA
-- to read (`langgraph-durable schema`). tests/migration checks that the two agree.

CREATE TABLE checkpoint_migrations (
    v INTEGER PRIMARY KEY
);

CREATE TABLE checkpoints (
    thread_id TEXT NOT NULL,
    checkpoint_ns TEXT NOT NULL DEFAULT '',
    checkpoint_id TEXT NOT NULL,
    parent_checkpoint_id TEXT,
    type TEXT,
    checkpoint JSONB NOT NULL,
    metadata JSONB NOT NULL DEFAULT '{}',
    PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id)
);
CREATE INDEX checkpoints_thread_id_idx ON checkpoints (thread_id);
CREATE INDEX lgd_checkpoints_run_id_idx ON checkpoints ((metadata ->> 'run_id'));
CREATE INDEX lgd_checkpoints_thread_id_checkpoint_id_idx ON checkpoints (thread_id, checkpoint_id);

CREATE TABLE checkpoint_blobs (
    thread_id TEXT NOT NULL,
    checkpoint_ns TEXT NOT NULL DEFAULT '',
    channel TEXT NOT NULL,
    version TEXT NOT NULL,
    type TEXT NOT NULL,
    blob BYTEA,
    PRIMARY KEY (thread_id, checkpoint_ns, channel, version)
);
CREATE INDEX checkpoint_blobs_thread_id_idx ON checkpoint_blobs (thread_id);

CREATE TABLE checkpoint_writes (
    thread_id TEXT NOT NULL,
    checkpoint_ns TEXT NOT NULL DEFAULT '',
    checkpoint_id TEXT NOT NULL,
    task_id TEXT NOT NULL,
    idx INTEGER NOT NULL,
    channel TEXT NOT NULL,
    type TEXT,
    blob BYTEA NOT NULL,
    task_path TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id, task_id, idx)
);
CREATE INDEX checkpoint_writes_thread_id_idx ON checkpoint_writes (thread_id);
CREATE INDEX lgd_checkpoint_writes_interrupts_idx ON checkpoint_writes (thread_id, checkpoint_id)
    WHERE channel = '__interrupt__' AND checkpoint_ns = '';

CREATE TABLE langgraph_durable_migrations (
    v INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    applied_at TIMESTAMPTZ NOT NULL DEFAULT now()
);

CREATE TABLE langgraph_durable_effects (
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
CREATE INDEX lgd_effects_thread_idx ON langgraph_durable_effects (thread_id);
CREATE INDEX lgd_effects_open_idx ON langgraph_durable_effects (status, lease_expires_at)
    WHERE status IN ('running', 'unknown', 'deferred', 'retry_wait');

INSERT INTO checkpoint_migrations (v) SELECT generate_series(0, 9);
INSERT INTO langgraph_durable_migrations (v, name) VALUES
    (1, 'durable_001_checkpoints_run_id_idx_concurrently'),
    (2, 'durable_002_checkpoints_thread_order_idx_concurrently'),
    (3, 'durable_003_effects_journal'),
    (4, 'durable_004_interrupt_writes_idx_concurrently');
