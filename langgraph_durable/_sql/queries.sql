-- Every statement langgraph-durable sends, by name. `langgraph_durable._sql` parses the
-- blocks below into a dict of LiteralString. Parameters are named (`%(thread_id)s`) and
-- always bound: no value is ever formatted into SQL text.
--
-- The tables are those of langgraph-checkpoint-postgres, so both savers read each
-- other's threads.

-- name: create_durable_migrations_table
CREATE TABLE IF NOT EXISTS langgraph_durable_migrations (
    v INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    applied_at TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- name: try_lock_setup
-- One setup at a time per database, whatever process runs it. Tried, never waited on in
-- the server: a session blocked in pg_advisory_lock holds a snapshot, and CREATE INDEX
-- CONCURRENTLY in the lock holder waits for every older snapshot: a deadlock.
SELECT pg_try_advisory_lock(7236029419022517360) AS locked;

-- name: unlock_setup
SELECT pg_advisory_unlock(7236029419022517360);

-- name: record_upstream_version
INSERT INTO checkpoint_migrations (v) VALUES (%(v)s) ON CONFLICT (v) DO NOTHING;

-- name: record_durable_version
INSERT INTO langgraph_durable_migrations (v, name) VALUES (%(v)s, %(name)s)
ON CONFLICT (v) DO NOTHING;

-- name: index_is_invalid
-- An index left INVALID by an interrupted CREATE INDEX CONCURRENTLY (IF NOT EXISTS would
-- skip it and record the migration as done).
SELECT NOT i.indisvalid AS invalid
FROM pg_index i
JOIN pg_class c ON c.oid = i.indexrelid
WHERE c.relname = %(name)s AND pg_table_is_visible(c.oid);

-- name: drop_index_concurrently
DROP INDEX CONCURRENTLY IF EXISTS {index};

-- name: schema_versions
SELECT
    (SELECT coalesce(max(v), -1) FROM checkpoint_migrations) AS upstream,
    (SELECT coalesce(max(v), 0) FROM langgraph_durable_migrations) AS durable;

-- name: durable_schema_exists
SELECT to_regclass('langgraph_durable_migrations') IS NOT NULL AS durable,
       to_regclass('checkpoint_migrations') IS NOT NULL AS upstream;

-- name: select_tuple_columns
-- The columns of a checkpoint tuple: the row, its blobs by the versions it names, and the
-- pending writes stored against it. Both sub-selects hit primary keys.
SELECT
    c.thread_id,
    c.checkpoint,
    c.checkpoint_ns,
    c.checkpoint_id,
    c.parent_checkpoint_id,
    c.metadata,
    (
        SELECT array_agg(array[bl.channel::bytea, bl.type::bytea, bl.blob])
        FROM jsonb_each_text(c.checkpoint -> 'channel_versions') AS v
        -- One primary-key probe per version. A plain join lets the planner (which guesses
        -- 100 versions and an average-sized thread) hash-join every blob of the thread.
        CROSS JOIN LATERAL (
            SELECT b.channel, b.type, b.blob
            FROM checkpoint_blobs b
            WHERE b.thread_id = c.thread_id
                AND b.checkpoint_ns = c.checkpoint_ns
                AND b.channel = v.key
                AND b.version = v.value
            LIMIT 1
        ) AS bl
    ) AS channel_values,
    (
        SELECT array_agg(array[
            cw.task_id::bytea, cw.channel::bytea, cw.type::bytea, cw.blob,
            convert_to(cw.task_path, 'UTF8'), cw.idx::text::bytea
        ])
        FROM checkpoint_writes cw
        WHERE cw.thread_id = c.thread_id
            AND cw.checkpoint_ns = c.checkpoint_ns
            AND cw.checkpoint_id = c.checkpoint_id
    ) AS pending_writes
FROM checkpoints c

-- name: where_exact
WHERE c.thread_id = %(thread_id)s AND c.checkpoint_ns = %(checkpoint_ns)s
    AND c.checkpoint_id = %(checkpoint_id)s

-- name: where_latest
-- Written so that the primary key serves both the filter and the order: a backward scan
-- that stops at the first row, whatever the size of the thread.
WHERE c.thread_id = %(thread_id)s AND c.checkpoint_ns = %(checkpoint_ns)s
ORDER BY c.thread_id DESC, c.checkpoint_ns DESC, c.checkpoint_id DESC
LIMIT 1

-- name: list_thread
c.thread_id = %(thread_id)s

-- name: list_namespace
c.checkpoint_ns = %(checkpoint_ns)s

-- name: list_checkpoint_id
c.checkpoint_id = %(checkpoint_id)s

-- name: list_metadata
c.metadata @> %(metadata)s::jsonb

-- name: list_before
c.checkpoint_id < %(before)s

-- name: list_order_thread_namespace
ORDER BY c.thread_id DESC, c.checkpoint_ns DESC, c.checkpoint_id DESC

-- name: list_order_thread
ORDER BY c.thread_id DESC, c.checkpoint_id DESC

-- name: list_order_any
ORDER BY c.checkpoint_id DESC

-- name: list_limit
LIMIT %(limit)s

-- name: select_pending_sends
-- Checkpoints older than format v4 kept pending sends as writes of their parent.
SELECT
    checkpoint_id,
    array_agg(array[type::bytea, blob] ORDER BY task_path, task_id, idx) AS sends
FROM checkpoint_writes
WHERE thread_id = %(thread_id)s
    AND checkpoint_ns = %(checkpoint_ns)s
    AND checkpoint_id = ANY(%(checkpoint_ids)s)
    AND channel = '__pregel_tasks'
GROUP BY checkpoint_id

-- name: put_checkpoint
-- A checkpoint, the new versions of its blob-stored channels and the regular writes parked
-- for it (see checkpoint/_parking.py), as one statement: one round trip, atomic without
-- BEGIN/COMMIT. `synchronous_commit` is set for this statement's own transaction only
-- ('off' when the saver opts into asynchronous commits; then the parked writes, which
-- would otherwise commit synchronously on their own, are not taken).
WITH commit_mode AS (
    SELECT set_config('synchronous_commit', %(synchronous_commit)s, true)
), new_blobs AS (
    INSERT INTO checkpoint_blobs (thread_id, checkpoint_ns, channel, version, type, blob)
    SELECT %(thread_id)s, %(checkpoint_ns)s, b.channel, b.version, b.type, b.blob
    FROM unnest(
        %(channels)s::text[], %(versions)s::text[], %(types)s::text[], %(blobs)s::bytea[]
    ) AS b(channel, version, type, blob)
    ON CONFLICT (thread_id, checkpoint_ns, channel, version) DO NOTHING
), parked_writes AS (
    INSERT INTO checkpoint_writes
        (thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, idx, channel, type, blob)
    SELECT %(thread_id)s, %(checkpoint_ns)s, w.checkpoint_id, w.task_id, w.task_path,
        w.idx, w.channel, w.type, w.blob
    FROM unnest(
        %(w_checkpoint_ids)s::text[], %(w_task_ids)s::text[], %(w_task_paths)s::text[],
        %(w_idxs)s::int[], %(w_channels)s::text[], %(w_types)s::text[], %(w_blobs)s::bytea[]
    ) AS w(checkpoint_id, task_id, task_path, idx, channel, type, blob)
    ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id, task_id, idx) DO NOTHING
)
INSERT INTO checkpoints
    (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, checkpoint, metadata)
SELECT %(thread_id)s, %(checkpoint_ns)s, %(checkpoint_id)s, %(parent_checkpoint_id)s,
    %(checkpoint)s::jsonb, %(metadata)s::jsonb
FROM commit_mode
ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id)
DO UPDATE SET checkpoint = EXCLUDED.checkpoint, metadata = EXCLUDED.metadata

-- name: upsert_writes
-- Special writes (errors, interrupts, resumes) replace what a task wrote before.
INSERT INTO checkpoint_writes
    (thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, idx, channel, type, blob)
SELECT %(thread_id)s, %(checkpoint_ns)s, %(checkpoint_id)s, %(task_id)s, %(task_path)s,
    w.idx, w.channel, w.type, w.blob
FROM unnest(%(idxs)s::int[], %(channels)s::text[], %(types)s::text[], %(blobs)s::bytea[])
    AS w(idx, channel, type, blob)
ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id, task_id, idx) DO UPDATE SET
    channel = EXCLUDED.channel, type = EXCLUDED.type, blob = EXCLUDED.blob

-- name: insert_writes
-- Regular writes are kept as first stored: a re-run of the same task cannot change them.
INSERT INTO checkpoint_writes
    (thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, idx, channel, type, blob)
SELECT %(thread_id)s, %(checkpoint_ns)s, %(checkpoint_id)s, %(task_id)s, %(task_path)s,
    w.idx, w.channel, w.type, w.blob
FROM unnest(%(idxs)s::int[], %(channels)s::text[], %(types)s::text[], %(blobs)s::bytea[])
    AS w(idx, channel, type, blob)
ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id, task_id, idx) DO NOTHING

-- name: delete_threads
-- Every row of the given threads, in one atomic statement.
WITH deleted_writes AS (
    DELETE FROM checkpoint_writes WHERE thread_id = ANY(%(thread_ids)s)
), deleted_blobs AS (
    DELETE FROM checkpoint_blobs WHERE thread_id = ANY(%(thread_ids)s)
)
DELETE FROM checkpoints WHERE thread_id = ANY(%(thread_ids)s)

-- name: thread_has_checkpoints
SELECT EXISTS (SELECT 1 FROM checkpoints WHERE thread_id = %(thread_id)s) AS found

-- name: copy_thread_checkpoints
INSERT INTO checkpoints
    (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, checkpoint, metadata)
SELECT %(target)s, checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, checkpoint,
    metadata
FROM checkpoints WHERE thread_id = %(source)s

-- name: copy_thread_blobs
INSERT INTO checkpoint_blobs (thread_id, checkpoint_ns, channel, version, type, blob)
SELECT %(target)s, checkpoint_ns, channel, version, type, blob
FROM checkpoint_blobs WHERE thread_id = %(source)s

-- name: copy_thread_writes
INSERT INTO checkpoint_writes
    (thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, idx, channel, type, blob)
SELECT %(target)s, checkpoint_ns, checkpoint_id, task_id, task_path, idx, channel, type, blob
FROM checkpoint_writes WHERE thread_id = %(source)s

-- name: delete_runs
-- Removes the runs' checkpoints with their writes, and reports which blobs they named so
-- that the ones no remaining checkpoint names can go too.
WITH deleted AS (
    DELETE FROM checkpoints
    WHERE metadata ->> 'run_id' = ANY(%(run_ids)s)
    RETURNING thread_id, checkpoint_ns, checkpoint_id, checkpoint -> 'channel_versions' AS versions
), deleted_writes AS (
    DELETE FROM checkpoint_writes w
    USING deleted d
    WHERE w.thread_id = d.thread_id
        AND w.checkpoint_ns = d.checkpoint_ns
        AND w.checkpoint_id = d.checkpoint_id
)
SELECT DISTINCT d.thread_id, d.checkpoint_ns, v.key AS channel, v.value AS version
FROM deleted d
CROSS JOIN LATERAL jsonb_each_text(d.versions) AS v

-- name: delete_unreferenced_blobs
-- Given candidate blobs, deletes those that no checkpoint of their namespace names.
DELETE FROM checkpoint_blobs b
USING unnest(
    %(thread_ids)s::text[], %(namespaces)s::text[], %(channels)s::text[], %(versions)s::text[]
) AS g(thread_id, checkpoint_ns, channel, version)
WHERE b.thread_id = g.thread_id
    AND b.checkpoint_ns = g.checkpoint_ns
    AND b.channel = g.channel
    AND b.version = g.version
    AND NOT EXISTS (
        SELECT 1 FROM checkpoints c
        WHERE c.thread_id = g.thread_id
            AND c.checkpoint_ns = g.checkpoint_ns
            AND c.checkpoint -> 'channel_versions' ->> g.channel = g.version
    )

-- name: lock_thread
-- Serialises maintenance of one thread (prune, retention) without blocking its runs.
SELECT pg_advisory_xact_lock(hashtextextended('langgraph-durable thread ' || %(thread_id)s, 0))

-- name: latest_checkpoint_id
SELECT checkpoint_id FROM checkpoints
WHERE thread_id = %(thread_id)s AND checkpoint_ns = %(checkpoint_ns)s
ORDER BY thread_id DESC, checkpoint_ns DESC, checkpoint_id DESC
LIMIT 1

-- name: thread_heads
-- The latest checkpoint of every namespace of a thread.
SELECT DISTINCT ON (checkpoint_ns) checkpoint_ns, checkpoint_id,
    coalesce(
        ARRAY(SELECT jsonb_object_keys(metadata -> 'counters_since_delta_snapshot')),
        ARRAY[]::text[]
    ) AS delta_channels
FROM checkpoints
WHERE thread_id = %(thread_id)s
ORDER BY checkpoint_ns DESC, checkpoint_id DESC

-- name: delta_history
-- The history of channels in one statement. The walk follows parents from a checkpoint
-- until every channel has a stored value (a blob or an inline value); `visiting` holds the
-- channels still unresolved when a row is reached. It returns the walked rows ('c'), their
-- writes of the channels unresolved there ('w'), and the stored value that ends each
-- channel's walk ('s': a blob if there is one, else the inline value).
WITH RECURSIVE walk AS (
    SELECT
        c.checkpoint_id,
        c.parent_checkpoint_id,
        ARRAY[]::text[] AS visiting,
        %(channels)s::text[] AS remaining,
        0 AS depth
    FROM checkpoints c
    WHERE c.thread_id = %(thread_id)s
        AND c.checkpoint_ns = %(checkpoint_ns)s
        AND c.checkpoint_id = %(checkpoint_id)s
    UNION ALL
    SELECT
        p.checkpoint_id,
        p.parent_checkpoint_id,
        w.remaining,
        ARRAY(
            SELECT ch FROM unnest(w.remaining) AS ch
            WHERE coalesce(jsonb_typeof(p.checkpoint -> 'channel_values' -> ch), 'null') = 'null'
                AND NOT EXISTS (
                    SELECT 1 FROM checkpoint_blobs b
                    WHERE b.thread_id = %(thread_id)s
                        AND b.checkpoint_ns = %(checkpoint_ns)s
                        AND b.channel = ch
                        AND b.version = p.checkpoint -> 'channel_versions' ->> ch
                        AND b.type <> 'empty'
                )
        ),
        w.depth + 1
    FROM walk w
    -- LATERAL ... LIMIT 1: one primary-key lookup per step. A plain join lets a generic
    -- plan hash-join every checkpoint of the thread at every step (quadratic).
    CROSS JOIN LATERAL (
        SELECT p.checkpoint_id, p.parent_checkpoint_id, p.checkpoint
        FROM checkpoints p
        WHERE p.thread_id = %(thread_id)s
            AND p.checkpoint_ns = %(checkpoint_ns)s
            AND p.checkpoint_id = w.parent_checkpoint_id
        LIMIT 1
    ) AS p
    WHERE cardinality(w.remaining) > 0
)
SELECT
    'c' AS kind, walk.depth, walk.checkpoint_id, NULL AS channel, NULL AS type,
    NULL::bytea AS blob, NULL AS task_id, NULL AS task_path, NULL::int AS idx,
    NULL::jsonb AS inline
FROM walk
UNION ALL
SELECT
    'w' AS kind, walk.depth, walk.checkpoint_id, cw.channel, cw.type, cw.blob, cw.task_id, cw.task_path, cw.idx,
    NULL::jsonb AS inline
FROM walk
CROSS JOIN LATERAL unnest(walk.visiting) AS ch
-- OFFSET 0 keeps this a lookup per walked checkpoint (primary-key prefix), never a join
-- against every write of the thread.
CROSS JOIN LATERAL (
    SELECT w.channel, w.type, w.blob, w.task_id, w.task_path, w.idx
    FROM checkpoint_writes w
    WHERE w.thread_id = %(thread_id)s
        AND w.checkpoint_ns = %(checkpoint_ns)s
        AND w.checkpoint_id = walk.checkpoint_id
        AND w.channel = ch
    OFFSET 0
) AS cw
WHERE NOT %(chain_only)s
UNION ALL
SELECT
    's' AS kind, walk.depth, walk.checkpoint_id, ch AS channel, b.type, b.blob, NULL, NULL, NULL,
    CASE WHEN b.blob IS NULL THEN c.checkpoint -> 'channel_values' -> ch END AS inline
FROM walk
CROSS JOIN LATERAL unnest(walk.visiting) AS ch
CROSS JOIN LATERAL (
    SELECT c.checkpoint
    FROM checkpoints c
    WHERE c.thread_id = %(thread_id)s
        AND c.checkpoint_ns = %(checkpoint_ns)s
        AND c.checkpoint_id = walk.checkpoint_id
    LIMIT 1
) AS c
LEFT JOIN LATERAL (
    SELECT b.type, b.blob
    FROM checkpoint_blobs b
    WHERE b.thread_id = %(thread_id)s
        AND b.checkpoint_ns = %(checkpoint_ns)s
        AND b.channel = ch
        AND b.version = c.checkpoint -> 'channel_versions' ->> ch
        AND b.type <> 'empty'
    LIMIT 1
) AS b ON true
WHERE ch <> ALL(walk.remaining) AND NOT %(chain_only)s

-- name: prune_delete_checkpoints
-- keep_latest: deletes a namespace's checkpoints that are not kept, with their writes, and
-- reports the blobs they named.
WITH deleted AS (
    DELETE FROM checkpoints
    WHERE thread_id = %(thread_id)s
        AND checkpoint_ns = %(checkpoint_ns)s
        AND checkpoint_id <> ALL(%(kept)s)
    RETURNING checkpoint_id, checkpoint -> 'channel_versions' AS versions
), deleted_writes AS (
    DELETE FROM checkpoint_writes w
    USING deleted d
    WHERE w.thread_id = %(thread_id)s
        AND w.checkpoint_ns = %(checkpoint_ns)s
        AND w.checkpoint_id = d.checkpoint_id
)
SELECT DISTINCT v.key AS channel, v.value AS version
FROM deleted d
CROSS JOIN LATERAL jsonb_each_text(d.versions) AS v

-- name: prune_cut_parents
-- A kept checkpoint whose parent is gone becomes a root, so no reader follows a dangling link.
UPDATE checkpoints SET parent_checkpoint_id = NULL
WHERE thread_id = %(thread_id)s
    AND checkpoint_ns = %(checkpoint_ns)s
    AND checkpoint_id = ANY(%(kept)s)
    AND parent_checkpoint_id <> ALL(%(kept)s)

-- name: idle_threads
-- Threads whose newest checkpoint is older than the cutoff, oldest first.
SELECT thread_id, max((checkpoint ->> 'ts')::timestamptz) AS last_ts
FROM checkpoints
GROUP BY thread_id
HAVING max((checkpoint ->> 'ts')::timestamptz) < %(cutoff)s
ORDER BY last_ts
LIMIT %(batch)s

-- ---------------------------------------------------------------------------------------
-- The effect journal. Every write that starts or ends an attempt commits with
-- synchronous_commit on, whatever the session or the graph's durability mode (I1).
-- Transitions are conditional on the attempt and status the caller saw, so two workers
-- can never both own an attempt.

-- name: effect_claim
WITH commit_mode AS (SELECT set_config('synchronous_commit', 'on', true))
INSERT INTO langgraph_durable_effects
    (key, effect_name, input_hash, status, attempt, lease_owner, lease_expires_at,
     thread_id, checkpoint_ns, node, step)
SELECT %(key)s, %(effect_name)s, %(input_hash)s, 'running', 1, %(owner)s,
    clock_timestamp() + make_interval(secs => %(lease_seconds)s),
    %(thread_id)s, %(checkpoint_ns)s, %(node)s, %(step)s
FROM commit_mode
ON CONFLICT (key) DO NOTHING
RETURNING attempt

-- name: effect_get
SELECT key, effect_name, input_hash, status, attempt, lease_owner, lease_expires_at,
    next_attempt_at, result_type, result, error_type, error_message, usage, replays,
    thread_id, node, step, created_at, updated_at, completed_at, resolved_by,
    clock_timestamp() AS db_now
FROM langgraph_durable_effects
WHERE key = %(key)s

-- name: effect_take_over
WITH commit_mode AS (SELECT set_config('synchronous_commit', 'on', true))
UPDATE langgraph_durable_effects SET
    status = 'running',
    attempt = attempt + 1,
    lease_owner = %(owner)s,
    lease_expires_at = clock_timestamp() + make_interval(secs => %(lease_seconds)s),
    next_attempt_at = NULL,
    error_type = NULL,
    error_message = NULL,
    updated_at = clock_timestamp()
FROM commit_mode
WHERE key = %(key)s AND attempt = %(seen_attempt)s AND status = %(seen_status)s
RETURNING attempt

-- name: effect_complete
WITH commit_mode AS (SELECT set_config('synchronous_commit', 'on', true))
UPDATE langgraph_durable_effects SET
    status = 'completed',
    result_type = %(result_type)s,
    result = %(result)s,
    usage = %(usage)s::jsonb,
    resolved_by = coalesce(%(resolved_by)s, resolved_by),
    lease_owner = NULL,
    lease_expires_at = NULL,
    error_type = NULL,
    error_message = NULL,
    completed_at = clock_timestamp(),
    updated_at = clock_timestamp()
FROM commit_mode
WHERE key = %(key)s AND attempt = %(seen_attempt)s AND status = ANY(%(seen_statuses)s)
RETURNING attempt

-- name: effect_fail
WITH commit_mode AS (SELECT set_config('synchronous_commit', 'on', true))
UPDATE langgraph_durable_effects SET
    status = 'failed',
    error_type = %(error_type)s,
    error_message = %(error_message)s,
    resolved_by = %(resolved_by)s,
    lease_owner = NULL,
    lease_expires_at = NULL,
    completed_at = clock_timestamp(),
    updated_at = clock_timestamp()
FROM commit_mode
WHERE key = %(key)s AND attempt = %(seen_attempt)s AND status = ANY(%(seen_statuses)s)
RETURNING attempt

-- name: effect_wait_retry
-- `status` is 'retry_wait' (a retryable error, in-process backoff) or 'deferred' (rate
-- limited: the run parks until next_attempt_at).
WITH commit_mode AS (SELECT set_config('synchronous_commit', 'on', true))
UPDATE langgraph_durable_effects SET
    status = %(status)s,
    next_attempt_at = clock_timestamp() + make_interval(secs => %(delay_seconds)s),
    error_type = %(error_type)s,
    error_message = %(error_message)s,
    lease_owner = NULL,
    lease_expires_at = NULL,
    updated_at = clock_timestamp()
FROM commit_mode
WHERE key = %(key)s AND attempt = %(seen_attempt)s AND status = 'running'
RETURNING next_attempt_at

-- name: effect_mark_unknown
-- The attempt's outcome is open: a timeout or a dropped connection (error given, and a
-- delay before reconciling, for a request that may still be on its way), a lease that ran
-- out, or a result that could not be stored.
WITH commit_mode AS (SELECT set_config('synchronous_commit', 'on', true))
UPDATE langgraph_durable_effects SET
    status = 'unknown',
    error_type = coalesce(%(error_type)s, error_type),
    error_message = coalesce(%(error_message)s, error_message),
    next_attempt_at = CASE WHEN %(delay_seconds)s::float8 IS NULL THEN NULL
        ELSE clock_timestamp() + make_interval(secs => %(delay_seconds)s::float8) END,
    lease_owner = NULL,
    lease_expires_at = NULL,
    updated_at = clock_timestamp()
FROM commit_mode
WHERE key = %(key)s AND attempt = %(seen_attempt)s AND status = 'running'

-- name: effect_release
-- Control flow (an interrupt) left the call: the next call starts a fresh attempt.
UPDATE langgraph_durable_effects SET
    status = 'retry_wait', next_attempt_at = clock_timestamp(),
    lease_owner = NULL, lease_expires_at = NULL, updated_at = clock_timestamp()
WHERE key = %(key)s AND attempt = %(seen_attempt)s AND status = 'running'

-- name: effect_replayed
UPDATE langgraph_durable_effects SET replays = replays + 1 WHERE key = %(key)s

-- name: effect_allow_retry
-- Resolution by hand: the receiver never acted, so the next call may attempt again.
UPDATE langgraph_durable_effects SET
    status = 'retry_wait', next_attempt_at = clock_timestamp(), resolved_by = %(resolved_by)s,
    lease_owner = NULL, lease_expires_at = NULL, updated_at = clock_timestamp()
WHERE key = %(key)s AND status = ANY(%(seen_statuses)s)
RETURNING attempt

-- name: effects_open
-- Effects that need attention or are under way, oldest first, for operators.
SELECT key, effect_name, status, attempt, lease_owner, lease_expires_at, next_attempt_at,
    error_type, error_message, thread_id, node, step, updated_at
FROM langgraph_durable_effects
WHERE status IN ('running', 'unknown', 'deferred', 'retry_wait')
    AND (%(thread_id)s::text IS NULL OR thread_id = %(thread_id)s)
ORDER BY updated_at
LIMIT %(limit)s

-- name: token_ledger
-- Tokens paid for by model calls of a thread, and tokens not paid again thanks to replays.
SELECT
    coalesce(sum((usage ->> 'input_tokens')::bigint), 0) AS input_tokens,
    coalesce(sum((usage ->> 'output_tokens')::bigint), 0) AS output_tokens,
    coalesce(sum((usage ->> 'total_tokens')::bigint), 0) AS total_tokens,
    coalesce(sum((usage ->> 'total_tokens')::bigint * replays), 0) AS saved_total_tokens,
    coalesce(sum((usage ->> 'input_tokens')::bigint * replays), 0) AS saved_input_tokens,
    coalesce(sum((usage ->> 'output_tokens')::bigint * replays), 0) AS saved_output_tokens,
    count(*) AS calls,
    coalesce(sum(replays), 0) AS replays
FROM langgraph_durable_effects
WHERE thread_id = %(thread_id)s AND usage IS NOT NULL AND status = 'completed'

-- name: pending_interrupts
-- Threads whose latest root checkpoint has interrupts waiting for an answer, oldest first.
SELECT w.thread_id, w.checkpoint_id, w.task_id, w.type, w.blob,
    (c.checkpoint ->> 'ts')::timestamptz AS waiting_since,
    clock_timestamp() AS db_now
FROM checkpoint_writes w
JOIN checkpoints c
    ON c.thread_id = w.thread_id
    AND c.checkpoint_ns = ''
    AND c.checkpoint_id = w.checkpoint_id
WHERE w.channel = '__interrupt__'
    AND w.checkpoint_ns = ''
    AND (%(thread_id)s::text IS NULL OR w.thread_id = %(thread_id)s)
    AND NOT EXISTS (
        SELECT 1 FROM checkpoints later
        WHERE later.thread_id = w.thread_id
            AND later.checkpoint_ns = ''
            AND later.checkpoint_id > w.checkpoint_id
    )
ORDER BY waiting_since, w.thread_id
LIMIT %(limit)s

-- name: effect_extend_lease
-- The heartbeat of a long attempt: still ours, still running, so the lease moves on.
UPDATE langgraph_durable_effects SET
    lease_expires_at = clock_timestamp() + make_interval(secs => %(lease_seconds)s),
    updated_at = clock_timestamp()
WHERE key = %(key)s AND attempt = %(seen_attempt)s AND status = 'running'
