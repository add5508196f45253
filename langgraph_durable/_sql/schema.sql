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
-- Upstream's single-column thread_id indexes are not here: durable_008-010 drop them, as
-- each table has another index that starts with thread_id.
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
    completed_at TIMESTAMPTZ,
    completion_event TEXT,
    default_key BOOLEAN NOT NULL DEFAULT false
);
CREATE INDEX lgd_effects_thread_idx ON langgraph_durable_effects (thread_id);
CREATE INDEX lgd_effects_open_idx ON langgraph_durable_effects (status, lease_expires_at)
    WHERE status IN ('running', 'unknown', 'deferred', 'retry_wait');

CREATE TABLE langgraph_durable_threads (
    thread_id TEXT PRIMARY KEY,
    fencing_token BIGINT NOT NULL DEFAULT 0,
    owner TEXT,
    run_id TEXT,
    lease_expires_at TIMESTAMPTZ,
    updated_at TIMESTAMPTZ NOT NULL DEFAULT now()
);

CREATE TABLE langgraph_durable_runs (
    run_id TEXT PRIMARY KEY,
    thread_id TEXT NOT NULL,
    graph_name TEXT NOT NULL,
    graph_version TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('pending', 'running', 'success', 'error', 'timeout',
        'interrupted', 'deferred', 'blocked', 'cancelled')),
    status_reason TEXT,
    multitask_strategy TEXT NOT NULL DEFAULT 'enqueue'
        CHECK (multitask_strategy IN ('reject', 'enqueue', 'interrupt', 'rollback')),
    durability TEXT NOT NULL DEFAULT 'sync' CHECK (durability IN ('sync', 'async', 'exit')),
    input_type TEXT,
    input BYTEA,
    input_after TEXT,
    config JSONB NOT NULL DEFAULT '{}',
    metadata JSONB NOT NULL DEFAULT '{}',
    attempt INTEGER NOT NULL DEFAULT 0,
    max_attempts INTEGER NOT NULL DEFAULT 3,
    owner TEXT,
    fencing_token BIGINT,
    lease_expires_at TIMESTAMPTZ,
    heartbeat_at TIMESTAMPTZ,
    last_progress_at TIMESTAMPTZ,
    step INTEGER,
    retry_at TIMESTAMPTZ,
    deadline_at TIMESTAMPTZ,
    stuck_since TIMESTAMPTZ,
    output_type TEXT,
    output BYTEA,
    error_type TEXT,
    error_message TEXT,
    created_at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp(),
    updated_at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp(),
    started_at TIMESTAMPTZ,
    finished_at TIMESTAMPTZ,
    timeout_seconds DOUBLE PRECISION
);
CREATE UNIQUE INDEX lgd_runs_one_running_per_thread
    ON langgraph_durable_runs (thread_id) WHERE status = 'running';
CREATE INDEX lgd_runs_queue ON langgraph_durable_runs (created_at)
    WHERE status IN ('pending', 'deferred', 'running');
CREATE INDEX lgd_runs_thread ON langgraph_durable_runs (thread_id, created_at);
CREATE INDEX lgd_runs_status ON langgraph_durable_runs (status, updated_at);

CREATE TABLE langgraph_durable_workers (
    worker_id TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    graphs JSONB NOT NULL,
    started_at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp(),
    heartbeat_at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp()
);

-- The transactional outbox (invariant I7) and the inbox its consumers use.
--
-- langgraph_durable_outbox: one row per event, inserted in the transaction of the state
-- change it announces (a checkpoint or a task's writes, a caller's `emit_txn`). A relay
-- claims the oldest pending event of each key with FOR UPDATE SKIP LOCKED, publishes it
-- with `event_id` as the message id and marks it published in the same transaction.
-- `seq` orders events of one key; a row that keeps failing becomes 'dead' (replayable).
CREATE TABLE langgraph_durable_outbox (
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
CREATE INDEX lgd_outbox_pending
    ON langgraph_durable_outbox (key, seq) WHERE status = 'pending';
CREATE INDEX lgd_outbox_published
    ON langgraph_durable_outbox (published_at) WHERE status = 'published';

-- Relays LISTEN on this channel; identical notifications of one transaction fold into one.
CREATE OR REPLACE FUNCTION langgraph_durable_outbox_notify() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('langgraph_durable_outbox', '');
    RETURN NULL;
END
$$;
CREATE TRIGGER lgd_outbox_notify AFTER INSERT ON langgraph_durable_outbox
    FOR EACH ROW EXECUTE FUNCTION langgraph_durable_outbox_notify();

-- langgraph_durable_inbox: message ids a consumer has acted on, recorded in the transaction
-- of its own work, so a redelivered message is dropped.
CREATE TABLE langgraph_durable_inbox (
    consumer TEXT NOT NULL,
    message_id TEXT NOT NULL,
    received_at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (consumer, message_id)
);

-- The stored values (a checkpoint's JSON, blobs, task writes) are compressed with lz4
-- instead of Postgres' default pglz. Postgres compresses a row's values once the row passes
-- about 2 kB, inside the statement that writes it; with pglz that cost the server more than
-- the rest of a put (our put statement with a 3 kB checkpoint: 446 us with pglz, 363 with
-- lz4; a 58 kB message list: 4.1 against 2.4 ms). The price: 13-16% more space for a
-- chat's message list, and a value pglz leaves uncompressed (it gives up under 25% saved)
-- is stored compressed, so reading it back decompresses (50 MB: 5% slower). Only values
-- written from now on change; both savers read either. A server without lz4 (PostgreSQL
-- 13, or built without it, like the embedded one) keeps pglz, with a notice; after moving
-- to one with lz4, run the three statements below by hand. To go back to pglz, per column:
--   ALTER TABLE checkpoint_blobs ALTER COLUMN blob SET COMPRESSION pglz;
-- The ALTERs lock the tables (ACCESS EXCLUSIVE) until this migration commits; setup()
-- waits for those locks in short tries, so a long transaction does not stall the tables.
DO $$
BEGIN
    IF EXISTS (
        SELECT 1 FROM pg_settings
        WHERE name = 'default_toast_compression' AND 'lz4' = ANY(enumvals)
    ) THEN
        EXECUTE 'ALTER TABLE checkpoints ALTER COLUMN checkpoint SET COMPRESSION lz4';
        EXECUTE 'ALTER TABLE checkpoint_blobs ALTER COLUMN blob SET COMPRESSION lz4';
        EXECUTE 'ALTER TABLE checkpoint_writes ALTER COLUMN blob SET COMPRESSION lz4';
    ELSE
        RAISE NOTICE 'this server has no lz4 compression: checkpoint values stay pglz';
    END IF;
END
$$;

INSERT INTO checkpoint_migrations (v) SELECT generate_series(0, 9);
INSERT INTO langgraph_durable_migrations (v, name) VALUES
    (1, 'durable_001_checkpoints_run_id_idx_concurrently'),
    (2, 'durable_002_checkpoints_thread_order_idx_concurrently'),
    (3, 'durable_003_effects_journal'),
    (4, 'durable_004_interrupt_writes_idx_concurrently'),
    (5, 'durable_005_runs'),
    (6, 'durable_006_outbox'),
    (7, 'durable_007_lz4_values'),
    (8, 'durable_008_drop_checkpoints_thread_id_idx_concurrently'),
    (9, 'durable_009_drop_checkpoint_blobs_thread_id_idx_concurrently'),
    (10, 'durable_010_drop_checkpoint_writes_thread_id_idx_concurrently'),
    (11, 'durable_011_runs_timeout'),
    (12, 'durable_012_effects_completion_event'),
    (13, 'durable_013_effects_default_key');
