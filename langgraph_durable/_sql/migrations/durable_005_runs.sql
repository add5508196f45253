-- Runs that finish by themselves: the run registry, thread leases with fencing tokens, and
-- the workers that take runs.
--
-- langgraph_durable_threads: who may advance a thread now. Every write that advances a
-- thread under a lease (a checkpoint, a task's writes) checks `fencing_token`; a worker
-- that took over bumped it, so a stale worker's writes are refused (invariant I5).
CREATE TABLE IF NOT EXISTS langgraph_durable_threads (
    thread_id TEXT PRIMARY KEY,
    fencing_token BIGINT NOT NULL DEFAULT 0,
    owner TEXT,
    run_id TEXT,
    lease_expires_at TIMESTAMPTZ,
    updated_at TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- langgraph_durable_runs: one row per run. `status` uses the Agent Server's words
-- (pending, running, success, error, timeout, interrupted) plus ours: deferred (waits until
-- retry_at), blocked (needs a person: status_reason says why), cancelled.
CREATE TABLE IF NOT EXISTS langgraph_durable_runs (
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
    finished_at TIMESTAMPTZ
);
-- At most one running run per thread, whatever the workers do.
CREATE UNIQUE INDEX IF NOT EXISTS lgd_runs_one_running_per_thread
    ON langgraph_durable_runs (thread_id) WHERE status = 'running';
-- The queue: what a worker may take, oldest first.
CREATE INDEX IF NOT EXISTS lgd_runs_queue ON langgraph_durable_runs (created_at)
    WHERE status IN ('pending', 'deferred', 'running');
CREATE INDEX IF NOT EXISTS lgd_runs_thread ON langgraph_durable_runs (thread_id, created_at);
CREATE INDEX IF NOT EXISTS lgd_runs_status ON langgraph_durable_runs (status, updated_at);

-- Workers announce the graphs (and versions) they run, so a run no live worker can take
-- is reported as blocked instead of waiting in silence.
CREATE TABLE IF NOT EXISTS langgraph_durable_workers (
    worker_id TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    graphs JSONB NOT NULL,
    started_at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp(),
    heartbeat_at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp()
);
