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

-- name: migration_lock_wait
-- A migration's transaction waits this long (ms) for a table lock, or less if the session
-- says so: a migration that alters a table holds back every reader and writer of it
-- while it waits, so it waits in short tries (`_migrate.py`). pg_settings gives ms.
SELECT set_config(
    'lock_timeout',
    (CASE WHEN s.setting::int > 0 AND s.setting::int < %(ms)s
        THEN s.setting::int ELSE %(ms)s END)::text || 'ms',
    true
)
FROM pg_settings s WHERE s.name = 'lock_timeout';

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

-- name: index_of_checkpoint_tables
-- Whether the index `name` names (found on the search_path, as DROP INDEX finds it) is one
-- of the checkpoint tables' (also found on the search_path): a migration that drops one of
-- upstream's indexes leaves a same-named index of another schema alone.
SELECT EXISTS (
    SELECT 1 FROM pg_index
    WHERE indexrelid = to_regclass(%(name)s)
        AND indrelid IN (
            to_regclass('checkpoints'),
            to_regclass('checkpoint_blobs'),
            to_regclass('checkpoint_writes')
        )
) AS ours;

-- name: drop_index_concurrently
DROP INDEX CONCURRENTLY IF EXISTS {index};

-- name: set_session_timeouts
-- The lock_timeout and statement_timeout a saver or journal was given, for this session
-- (SET, not SET LOCAL: once per connection, not a statement per call). NULL puts the
-- session's own value back (from the DSN's options, the role or the database).
SELECT set_config(
    name,
    coalesce(
        CASE name
            WHEN 'lock_timeout' THEN %(lock_timeout)s::text
            ELSE %(statement_timeout)s::text
        END,
        reset_val
    ),
    false
) AS value
FROM pg_settings
WHERE name IN ('lock_timeout', 'statement_timeout');

-- name: schema_versions
SELECT
    (SELECT coalesce(max(v), -1) FROM checkpoint_migrations) AS upstream,
    (SELECT coalesce(max(v), 0) FROM langgraph_durable_migrations) AS durable;

-- name: durable_schema_exists
SELECT to_regclass('langgraph_durable_migrations') IS NOT NULL AS durable,
       to_regclass('checkpoint_migrations') IS NOT NULL AS upstream;

-- name: namespace_exists
-- Whether a schema exists (a demo creates its own only when it does not: CREATE SCHEMA IF
-- NOT EXISTS needs the CREATE privilege even then, which an application role lacks).
SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = %(schema)s) AS found;

-- name: select_tuple_columns
-- The columns of a checkpoint tuple: the row, its blobs by the versions it names, and the
-- pending writes stored against it. Both sub-selects hit primary keys.
--
-- A blob over 128 KiB comes as NULL with its version as a fourth element (its size is read
-- from the TOAST pointer, the value is not touched), and the reader fetches it by that key
-- as a column of its own (`select_large_blobs`): inside an array the server copies a
-- value three more times and sends it element by element, which made a 1 MB read 5.7
-- instead of 3.6 ms with a second statement, and a 50 MB one 140 ms slower. A blob's key
-- is never written twice (`ON CONFLICT DO NOTHING`), so the second statement finds the
-- same value or none. `select_tuple_columns_whole` (`_sql/__init__.py`) is this statement
-- with every blob inside the array, for the read again after a blob went missing.
SELECT
    c.thread_id,
    c.checkpoint,
    c.checkpoint_ns,
    c.checkpoint_id,
    c.parent_checkpoint_id,
    c.metadata,
    (
        -- convert_to, not ::bytea: a cast reads backslashes in the text as escapes.
        SELECT array_agg(array[
            convert_to(bl.channel, 'UTF8'), convert_to(bl.type, 'UTF8'),
            CASE WHEN octet_length(bl.blob) <= 131072 THEN bl.blob END,
            CASE WHEN octet_length(bl.blob) > 131072 THEN convert_to(v.value, 'UTF8') END
        ])
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
            convert_to(cw.task_id, 'UTF8'), convert_to(cw.channel, 'UTF8'),
            convert_to(cw.type, 'UTF8'), cw.blob,
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
-- Written so that only the primary key serves both the filter and the order: a backward
-- scan that stops at the first row, whatever the size of the thread and its namespaces.
-- The namespace is matched as a range of one value, not with `=`: an equality lets the
-- planner drop it from the order, and then the (thread, checkpoint) index walks the thread
-- newest first and filters the namespace, reading every newer checkpoint of the others
-- (a generic plan does so for a subgraph's namespace; any plan for the root after a long
-- subgraph). Both bounds match the rows `=` matches, under any collation. Only the latest
-- of a namespace reads it this way: where a checkpoint id follows, `=` keeps all three
-- columns equalities, and the scan stops at that checkpoint.
WHERE c.thread_id = %(thread_id)s
    AND c.checkpoint_ns >= %(checkpoint_ns)s AND c.checkpoint_ns <= %(checkpoint_ns)s
ORDER BY c.thread_id DESC, c.checkpoint_ns DESC, c.checkpoint_id DESC
LIMIT 1

-- name: list_thread
c.thread_id = %(thread_id)s

-- name: list_namespace
c.checkpoint_ns >= %(checkpoint_ns)s AND c.checkpoint_ns <= %(checkpoint_ns)s

-- name: list_namespace_exact
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

-- name: select_large_blobs
-- The blobs `select_tuple_columns` left out for their size, each as a column of its own
-- row, by the keys it gave. No row for one: it was deleted since, with the checkpoint
-- that named it (`delete_thread`, `delete_for_runs`, `prune`).
SELECT k.i, b.blob
FROM unnest(
    %(thread_ids)s::text[], %(checkpoint_nss)s::text[], %(channels)s::text[],
    %(versions)s::text[]
) WITH ORDINALITY AS k(thread_id, checkpoint_ns, channel, version, i)
JOIN checkpoint_blobs b
    ON b.thread_id = k.thread_id
    AND b.checkpoint_ns = k.checkpoint_ns
    AND b.channel = k.channel
    AND b.version = k.version

-- name: select_pending_sends
-- Checkpoints older than format v4 kept pending sends as writes of their parent.
SELECT
    checkpoint_id,
    array_agg(array[convert_to(type, 'UTF8'), blob] ORDER BY task_path, task_id, idx) AS sends
FROM checkpoint_writes
WHERE thread_id = %(thread_id)s
    AND checkpoint_ns = %(checkpoint_ns)s
    AND checkpoint_id = ANY(%(checkpoint_ids)s)
    AND channel = '__pregel_tasks'
GROUP BY checkpoint_id

-- name: put_checkpoint_head
-- A checkpoint, the new versions of its blob-stored channels and the regular writes parked
-- for it (see checkpoint/_parking.py), as one statement: one round trip, atomic without
-- BEGIN/COMMIT. `synchronous_commit` is set for this statement's own transaction only
-- ('off' when the saver opts into asynchronous commits; then the parked writes, which
-- would otherwise commit synchronously on their own, are not taken).
-- Under a thread lease (a run's worker, or `exclusive`) the config carries a fencing token:
-- the statement writes nothing unless the token is still the thread's (`fence`; the row
-- lock serialises it with a takeover), and it records the run's progress in the same
-- transaction. Without a token, `fence` passes without a lookup. The caller reads the
-- row count: 0 means fenced out (invariant I5).
-- Assembled from these blocks by `_sql.put_checkpoint`; a few blobs or parked writes go as
-- rows of scalar parameters, more as arrays unnested in a select list (see docs/design.md,
-- "New SQL").
WITH commit_mode AS (
    SELECT set_config('synchronous_commit', %(synchronous_commit)s, true)
), fence AS (

-- name: fence_by_token
-- A write under a thread lease: it goes through only while the token is the thread's
-- (with a NULL token, always: the statements assembled in full serve both cases).
    SELECT %(fence_token)s::bigint IS NULL OR EXISTS (
        SELECT 1 FROM langgraph_durable_threads t
        WHERE t.thread_id = %(thread_id)s AND t.fencing_token = %(fence_token)s::bigint
        FOR SHARE
    ) AS ok

-- name: fence_none
-- A write without a token (no lease): nothing to look up. A block of its own rather than
-- `token IS NULL OR EXISTS (...)`: the lookup's plan costs the server about 15 us per
-- statement even when the OR never runs it.
    SELECT true AS ok

-- name: put_checkpoint_blobs
), new_blobs AS (
    INSERT INTO checkpoint_blobs (thread_id, checkpoint_ns, channel, version, type, blob)
    SELECT %(thread_id)s, %(checkpoint_ns)s, b.channel, b.version, b.type, b.blob

-- name: blob_rows_unnested
-- The blobs as arrays, for any number of them; a few go as rows of scalar parameters
-- instead (`_sql.put_checkpoint_statement`).
    FROM (
        SELECT
            unnest(%(channels)b::text[]) AS channel,
            unnest(%(versions)b::text[]) AS version,
            unnest(%(types)b::text[]) AS type,
            unnest(%(blobs)b::bytea[]) AS blob
    ) AS b

-- name: blob_rows_values
-- A few blobs as rows of scalar parameters: `_sql.put_checkpoint_statement` repeats the
-- row line for each, numbering its parameters (b0_, b1_, ...). The server spends 15-20 us
-- less per statement than unnesting arrays of the same rows.
    FROM (VALUES
        (%(b#_channel)s::text, %(b#_version)s::text, %(b#_type)s::text, %(b#_blob)s::bytea)
    ) AS b (channel, version, type, blob)

-- name: put_checkpoint_blobs_end
    WHERE (SELECT ok FROM fence)
    ON CONFLICT (thread_id, checkpoint_ns, channel, version) DO NOTHING

-- name: put_checkpoint_parked_writes
), parked_writes AS (
    INSERT INTO checkpoint_writes
        (thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, idx, channel, type, blob)
    SELECT %(thread_id)s, %(checkpoint_ns)s, w.checkpoint_id, w.task_id, w.task_path,
        w.idx, w.channel, w.type, w.blob

-- name: parked_write_rows_unnested
-- The parked writes as arrays, for any number of them; a few go as rows of scalar
-- parameters instead (`_sql.put_checkpoint_statement`).
    FROM (
        SELECT
            unnest(%(w_checkpoint_ids)b::text[]) AS checkpoint_id,
            unnest(%(w_task_ids)b::text[]) AS task_id,
            unnest(%(w_task_paths)b::text[]) AS task_path,
            unnest(%(w_idxs)b::int[]) AS idx,
            unnest(%(w_channels)b::text[]) AS channel,
            unnest(%(w_types)b::text[]) AS type,
            unnest(%(w_blobs)b::bytea[]) AS blob
    ) AS w

-- name: parked_write_rows_values
-- A few parked writes as rows of scalar parameters, like `blob_rows_values` (w0_, w1_, ...).
    FROM (VALUES
        (%(w#_checkpoint_id)s::text, %(w#_task_id)s::text, %(w#_task_path)s::text, %(w#_idx)s::int, %(w#_channel)s::text, %(w#_type)s::text, %(w#_blob)s::bytea)
    ) AS w (checkpoint_id, task_id, task_path, idx, channel, type, blob)

-- name: put_checkpoint_parked_writes_end
    WHERE (SELECT ok FROM fence)
    ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id, task_id, idx) DO NOTHING

-- name: task_events
), events AS (
    -- Outbox events emitted by the tasks whose writes this statement stores (I7).
    INSERT INTO langgraph_durable_outbox (event_id, event_type, key, payload, thread_id, task_id)
    SELECT e.event_id, e.event_type, e.key, e.payload::jsonb, %(thread_id)s, e.task_id
    FROM (
        SELECT
            unnest(%(e_ids)b::uuid[]) AS event_id,
            unnest(%(e_types)b::text[]) AS event_type,
            unnest(%(e_keys)b::text[]) AS key,
            unnest(%(e_payloads)b::text[]) AS payload,
            unnest(%(e_task_ids)b::text[]) AS task_id
    ) AS e
    WHERE (SELECT ok FROM fence)
    ON CONFLICT (event_id) DO NOTHING

-- name: put_checkpoint_progress
), progress AS (
    UPDATE langgraph_durable_runs SET
        last_progress_at = clock_timestamp(),
        step = %(step)s,
        stuck_since = NULL,
        updated_at = clock_timestamp()
    WHERE run_id = %(run_id)s AND fencing_token = %(fence_token)s::bigint
        AND status = 'running' AND (SELECT ok FROM fence)

-- name: put_checkpoint_insert
)
INSERT INTO checkpoints
    (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, checkpoint, metadata)
SELECT %(thread_id)s, %(checkpoint_ns)s, %(checkpoint_id)s, %(parent_checkpoint_id)s,
    %(checkpoint)s::jsonb, %(metadata)s::jsonb
FROM commit_mode
WHERE (SELECT ok FROM fence)
ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id)
DO UPDATE SET checkpoint = EXCLUDED.checkpoint, metadata = EXCLUDED.metadata

-- name: put_checkpoints_head
-- Several threads' checkpoints, each with its blob-stored channels and parked writes, as
-- one statement: the puts that wait for a connection while every one is busy go together
-- (checkpoint/_combining.py). Only puts without a fencing token, run progress or outbox
-- events, and none larger than `_combining.MAX_PUT_BYTES`: the others go one by one
-- (`put_checkpoint`). Every row names its thread; all commit at once, so each put's own
-- rows are still stored together (I4). Arrays are unnested in select lists, never in
-- FROM (materialised: a large batch would spill to a temporary file). A row lock held
-- elsewhere must not hold up the other threads of the batch: the statement gives up
-- after `lock_timeout` (set here for its own transaction, before any insert: every insert
-- reads `commit_mode` first) and its puts are stored one by one. Assembled by
-- `_sql.put_checkpoints` with only the data-modifying CTEs the batch has rows for.
WITH commit_mode AS (
    SELECT set_config('synchronous_commit', %(synchronous_commit)s, true),
        set_config('lock_timeout', %(lock_timeout)s, true)

-- name: put_checkpoints_blobs
), new_blobs AS (
    INSERT INTO checkpoint_blobs (thread_id, checkpoint_ns, channel, version, type, blob)
    SELECT
        unnest(%(b_thread_ids)b::text[]),
        unnest(%(b_checkpoint_nss)b::text[]),
        unnest(%(channels)b::text[]),
        unnest(%(versions)b::text[]),
        unnest(%(types)b::text[]),
        unnest(%(blobs)b::bytea[])
    FROM commit_mode
    ON CONFLICT (thread_id, checkpoint_ns, channel, version) DO NOTHING

-- name: put_checkpoints_parked_writes
), parked_writes AS (
    INSERT INTO checkpoint_writes
        (thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, idx, channel, type, blob)
    SELECT
        unnest(%(w_thread_ids)b::text[]),
        unnest(%(w_checkpoint_nss)b::text[]),
        unnest(%(w_checkpoint_ids)b::text[]),
        unnest(%(w_task_ids)b::text[]),
        unnest(%(w_task_paths)b::text[]),
        unnest(%(w_idxs)b::int[]),
        unnest(%(w_channels)b::text[]),
        unnest(%(w_types)b::text[]),
        unnest(%(w_blobs)b::bytea[])
    FROM commit_mode
    ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id, task_id, idx) DO NOTHING

-- name: put_checkpoints_insert
-- Two checkpoints of one batch never share a key (`_combining.take_batch` keeps a repeat
-- for the next batch): ON CONFLICT DO UPDATE may not touch a row twice in one statement.
)
INSERT INTO checkpoints
    (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, checkpoint, metadata)
SELECT
    unnest(%(thread_ids)b::text[]),
    unnest(%(checkpoint_nss)b::text[]),
    unnest(%(checkpoint_ids)b::text[]),
    unnest(%(parent_checkpoint_ids)b::text[]),
    unnest(%(checkpoints)b::text[])::jsonb,
    unnest(%(metadatas)b::text[])::jsonb
FROM commit_mode
ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id)
DO UPDATE SET checkpoint = EXCLUDED.checkpoint, metadata = EXCLUDED.metadata

-- name: writes_fence
-- A task's writes against a checkpoint, assembled by `_sql.store_writes` from these blocks
-- and `task_events` (only when the task emitted events: an empty data-modifying CTE costs
-- the server 25-40 us). Fenced like `put_checkpoint`; the one row returned says whether
-- the fence let them through.
WITH fence AS (

-- name: writes_stored
), stored AS (
    INSERT INTO checkpoint_writes
        (thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, idx, channel, type, blob)
    SELECT %(thread_id)s, %(checkpoint_ns)s, %(checkpoint_id)s, %(task_id)s, %(task_path)s,
        w.idx, w.channel, w.type, w.blob
    FROM (
        SELECT
            unnest(%(idxs)b::int[]) AS idx,
            unnest(%(channels)b::text[]) AS channel,
            unnest(%(types)b::text[]) AS type,
            unnest(%(blobs)b::bytea[]) AS blob
    ) AS w
    WHERE (SELECT ok FROM fence)

-- name: writes_keep_first
-- Regular writes are kept as first stored: a re-run of the same task cannot change them.
    ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id, task_id, idx) DO NOTHING

-- name: writes_replace
-- Special writes (errors, interrupts, resumes) replace what a task wrote before.
    ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id, task_id, idx) DO UPDATE SET
        channel = EXCLUDED.channel, type = EXCLUDED.type, blob = EXCLUDED.blob

-- name: writes_end
)
SELECT ok FROM fence

-- name: lock_threads
-- `lock_thread` for several threads, taken in one order so that two callers cannot
-- deadlock. Then take `lock_thread_rows`.
SELECT count(pg_advisory_xact_lock(hashtextextended('langgraph-durable thread ' || t, 0)))
FROM (SELECT DISTINCT t FROM unnest(%(thread_ids)s::text[]) AS u(t) ORDER BY t) AS s

-- name: lock_thread_rows
-- The threads' rows in the run registry, for the transaction: until it ends, no run of
-- them can be created, claimed, resumed or finished, and no lease taken or renewed.
SELECT thread_id FROM langgraph_durable_threads
WHERE thread_id = ANY(%(thread_ids)s)
ORDER BY thread_id
FOR UPDATE

-- name: delete_threads
-- Every row of the given threads, in one atomic statement: checkpoints, writes, blobs, the
-- journal rows of their default-keyed effects that are settled (completed, failed) or never
-- reached the receiver (deferred, retry_wait), and their registry row when no run names it.
-- Business-keyed rows (`key=`) stay: other threads may share the key.
-- A thread with work in flight is not deleted: a run pending, running, deferred or
-- blocked, an effect whose outcome is open (running, unknown: the receiver may have acted),
-- or a live lease. An interrupted run does not keep it (its question dies with the thread;
-- a superseded one can never be resumed or cancelled). With `idle_before` (retention),
-- neither is one with an interrupted run or a checkpoint from then on, nor one whose latest
-- root checkpoint waits at an interrupt. With `all_or_none`, one such thread keeps them all.
-- The checks are here, not in an earlier statement, so that they and the deletes see the
-- same rows; the caller holds `lock_threads`. One row per thread: why it stays, if it does.
WITH state AS MATERIALIZED (
    SELECT t.thread_id,
        ARRAY(
            SELECT r.run_id FROM langgraph_durable_runs r
            WHERE r.thread_id = t.thread_id
                AND (r.status IN ('pending', 'running', 'deferred', 'blocked')
                    OR (r.status = 'interrupted' AND %(idle_before)s::timestamptz IS NOT NULL))
            ORDER BY r.created_at, r.run_id
            LIMIT 10
        ) AS open_runs,
        ARRAY(
            SELECT e.key FROM langgraph_durable_effects e
            WHERE e.thread_id = t.thread_id
                AND e.status IN ('running', 'unknown')
            ORDER BY e.key
            LIMIT 10
        ) AS open_effects,
        EXISTS (
            SELECT 1 FROM langgraph_durable_threads l
            WHERE l.thread_id = t.thread_id
                AND l.owner IS NOT NULL AND l.lease_expires_at >= clock_timestamp()
        ) AS leased,
        %(idle_before)s::timestamptz IS NOT NULL AND EXISTS (
            SELECT 1 FROM checkpoints c
            WHERE c.thread_id = t.thread_id
                AND (c.checkpoint ->> 'ts')::timestamptz >= %(idle_before)s::timestamptz
        ) AS recent,
        %(idle_before)s::timestamptz IS NOT NULL AND EXISTS (
            SELECT 1 FROM checkpoint_writes w
            WHERE w.thread_id = t.thread_id
                AND w.channel = '__interrupt__' AND w.checkpoint_ns = ''
                AND w.checkpoint_id = (
                    SELECT c.checkpoint_id FROM checkpoints c
                    WHERE c.thread_id = t.thread_id
                        AND c.checkpoint_ns >= '' AND c.checkpoint_ns <= ''
                    ORDER BY c.thread_id DESC, c.checkpoint_ns DESC, c.checkpoint_id DESC
                    LIMIT 1
                )
        ) AS waiting
    FROM (SELECT DISTINCT unnest(%(thread_ids)s::text[]) AS thread_id) AS t
), judged AS MATERIALIZED (
    SELECT s.*, (
        cardinality(s.open_runs) > 0 OR cardinality(s.open_effects) > 0
        OR s.leased OR s.recent OR s.waiting
    ) AS busy
    FROM state s
), target AS MATERIALIZED (
    SELECT thread_id FROM judged
    WHERE NOT busy AND NOT (%(all_or_none)s AND EXISTS (SELECT 1 FROM judged WHERE busy))
), deleted_writes AS (
    DELETE FROM checkpoint_writes WHERE thread_id = ANY(ARRAY(SELECT thread_id FROM target))
), deleted_blobs AS (
    DELETE FROM checkpoint_blobs WHERE thread_id = ANY(ARRAY(SELECT thread_id FROM target))
), deleted_checkpoints AS (
    DELETE FROM checkpoints WHERE thread_id = ANY(ARRAY(SELECT thread_id FROM target))
), deleted_effects AS (
    -- Only keys derived from the thread (`default_key`): a business key (`key=`) may be
    -- shared by another thread, whose replay of it must not become a second attempt (I2).
    DELETE FROM langgraph_durable_effects
    WHERE thread_id = ANY(ARRAY(SELECT thread_id FROM target))
        AND default_key AND status IN ('completed', 'failed', 'deferred', 'retry_wait')
), deleted_registry_row AS (
    -- Every run names its thread's row, so it stays while one does; so does a row whose
    -- lease lapsed without being let go (its holder may still write: a new row would
    -- count fencing tokens from 1 again, and could hand out the token it holds).
    DELETE FROM langgraph_durable_threads l
    WHERE l.thread_id = ANY(ARRAY(SELECT thread_id FROM target))
        AND l.owner IS NULL
        AND NOT EXISTS (SELECT 1 FROM langgraph_durable_runs r WHERE r.thread_id = l.thread_id)
)
SELECT j.thread_id, j.open_runs, j.open_effects, j.leased, j.recent, j.waiting,
    j.thread_id IN (SELECT thread_id FROM target) AS deleted
FROM judged j
ORDER BY j.thread_id

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

-- name: run_newer_started
-- A newer run of the thread that has started: the thread went on without the run created
-- at `created_at` (`retry` refuses it: it would go on from the newer run's checkpoints).
-- Not one rolled back since (its checkpoints are gone: the thread is back where it was).
SELECT run_id FROM langgraph_durable_runs
WHERE thread_id = %(thread_id)s AND created_at > %(created_at)s AND started_at IS NOT NULL
    AND NOT (status = 'cancelled'
        AND coalesce(status_reason, '') LIKE 'rollback: superseded by run %%')
ORDER BY created_at
LIMIT 1

-- name: delete_rolled_back_effects
-- The journal rows of the effects that runs rolled back (`multitask_strategy="rollback"`)
-- made. Their checkpoints are gone, so the next run goes through the same steps with the
-- same default keys: it found these rows, replayed the old run's result for its own input,
-- or refused another input as a mismatch, for good. As for a deleted thread, only keys
-- derived from the thread (`default_key`; a business key may be another thread's) and only
-- attempts that ended (a running or unknown one is left for its reconciliation). A thread
-- runs one run at a time, so its rows made since the first start of the earliest of these
-- runs are theirs; a run that never started made none. A row made before and taken over
-- by them (a failed run's pending task, continued) is not theirs and stays.
DELETE FROM langgraph_durable_effects
WHERE thread_id = %(thread_id)s
    AND default_key AND status IN ('completed', 'failed', 'deferred', 'retry_wait')
    AND created_at >= (
        SELECT min(started_at) FROM langgraph_durable_runs WHERE run_id = ANY(%(run_ids)s)
    )

-- name: lock_thread
-- Serialises maintenance of one thread (prune, retention) without blocking its runs.
SELECT pg_advisory_xact_lock(hashtextextended('langgraph-durable thread ' || %(thread_id)s, 0))

-- name: latest_checkpoint_id
-- The namespace as a range of one value: see `where_latest`.
SELECT checkpoint_id FROM checkpoints
WHERE thread_id = %(thread_id)s
    AND checkpoint_ns >= %(checkpoint_ns)s AND checkpoint_ns <= %(checkpoint_ns)s
ORDER BY thread_id DESC, checkpoint_ns DESC, checkpoint_id DESC
LIMIT 1

-- name: thread_heads
-- keep_latest's view of a thread, one row per namespace, in one statement (one snapshot):
-- the namespace's latest checkpoint; the parent it reads its pending sends from when it
-- predates format v4 (`sends_parent`: older checkpoints kept them as their parent's
-- writes); the root checkpoint a subgraph call started from (`root`, from its metadata)
-- and whether that one is saved (runs save in the background, so a call's checkpoints can
-- commit before it); the channels a DeltaChannel rebuilds from older checkpoints. The
-- heads come from the primary key alone; each head's row is then one lookup, so the big
-- checkpoint documents of the rest are never read.
SELECT
    h.checkpoint_ns,
    h.checkpoint_id,
    CASE WHEN jsonb_typeof(c.checkpoint -> 'v') = 'number'
        AND (c.checkpoint -> 'v')::numeric < 4
        AND EXISTS (
            SELECT 1 FROM checkpoint_writes w
            WHERE w.thread_id = %(thread_id)s
                AND w.checkpoint_ns = h.checkpoint_ns
                AND w.checkpoint_id = c.parent_checkpoint_id
                AND w.channel = '__pregel_tasks'
        )
    THEN c.parent_checkpoint_id END AS sends_parent,
    c.metadata -> 'parents' ->> '' AS root,
    EXISTS (
        SELECT 1 FROM checkpoints r
        WHERE r.thread_id = %(thread_id)s
            AND r.checkpoint_ns = ''
            AND r.checkpoint_id = c.metadata -> 'parents' ->> ''
    ) AS root_saved,
    coalesce(
        ARRAY(SELECT jsonb_object_keys(c.metadata -> 'counters_since_delta_snapshot')),
        ARRAY[]::text[]
    ) AS delta_channels
FROM (
    SELECT DISTINCT ON (checkpoint_ns) checkpoint_ns, checkpoint_id
    FROM checkpoints
    WHERE thread_id = %(thread_id)s
    ORDER BY checkpoint_ns DESC, checkpoint_id DESC
) AS h
CROSS JOIN LATERAL (
    SELECT c.checkpoint, c.parent_checkpoint_id, c.metadata
    FROM checkpoints c
    WHERE c.thread_id = %(thread_id)s
        AND c.checkpoint_ns = h.checkpoint_ns
        AND c.checkpoint_id = h.checkpoint_id
) AS c
ORDER BY h.checkpoint_ns DESC

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
                -- A scalar probe with LIMIT 1, not NOT EXISTS: the planner turns NOT EXISTS
                -- into an anti-join, and a generic plan then scanned the thread's index of
                -- blobs at every step (2 million rows for a 100-step walk). A sub-plan
                -- keeps one primary-key lookup per channel and step.
                AND (
                    SELECT 1 FROM checkpoint_blobs b
                    WHERE b.thread_id = %(thread_id)s
                        AND b.checkpoint_ns = %(checkpoint_ns)s
                        AND b.channel = ch
                        AND b.version = p.checkpoint -> 'channel_versions' ->> ch
                        AND b.type <> 'empty'
                    LIMIT 1
                ) IS NULL
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
-- reports the blobs they named. Only checkpoints up to the head read before: under read
-- committed this statement sees checkpoints a running thread committed since, and those
-- (its newest, not a stale one) must stay, with their writes and blobs. The head itself is
-- kept, except in an ended subgraph call, which keeps nothing.
WITH deleted AS (
    DELETE FROM checkpoints
    WHERE thread_id = %(thread_id)s
        AND checkpoint_ns = %(checkpoint_ns)s
        AND checkpoint_id <= %(head)s
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
-- A checkpoint left whose parent is gone becomes a root, so no reader follows a dangling
-- link. The parents gone are the ones `prune_delete_checkpoints` took: up to the head and
-- not kept. Left are the kept ones and any committed after the head was read (a fork from
-- an old checkpoint may have one of the deleted as its parent).
UPDATE checkpoints SET parent_checkpoint_id = NULL
WHERE thread_id = %(thread_id)s
    AND checkpoint_ns = %(checkpoint_ns)s
    AND (checkpoint_id = ANY(%(kept)s) OR checkpoint_id > %(head)s)
    AND parent_checkpoint_id <= %(head)s
    AND parent_checkpoint_id <> ALL(%(kept)s)

-- name: idle_threads
-- Threads whose newest checkpoint is older than the cutoff, oldest first, a page after
-- (after_ts, after_id): `delete_threads` keeps some of them (work in flight, waiting at an
-- interrupt), and the next page starts past those.
SELECT thread_id, max((checkpoint ->> 'ts')::timestamptz) AS last_ts
FROM checkpoints
GROUP BY thread_id
HAVING max((checkpoint ->> 'ts')::timestamptz) < %(cutoff)s
    AND (max((checkpoint ->> 'ts')::timestamptz), thread_id) > (
        coalesce(%(after_ts)s::timestamptz, '-infinity'), coalesce(%(after_id)s::text, '')
    )
ORDER BY last_ts, thread_id
LIMIT %(batch)s

-- ---------------------------------------------------------------------------------------
-- The effect journal. Every write that starts or ends an attempt commits with
-- synchronous_commit on, whatever the session or the graph's durability mode (I1).
-- Transitions are conditional on the attempt and status the caller saw, so two workers
-- can never both own an attempt.

-- name: effect_claim_head
-- A key claimed for a first attempt. Under a thread lease (the run's worker, `exclusive`)
-- the call carries the lease's fencing token, and the claim goes in only while the token
-- is the thread's (`fence`, as for checkpoints: I5). Under durability "async" or "exit"
-- LangGraph does not wait for a step's checkpoint before the next step, so a worker
-- fenced out of its run (taken over, cancelled, timed out, superseded) ran its nodes on;
-- refused here, their effects act no more. Row count 0: the key exists, or fenced out.
-- Assembled by `_sql.claim_effect`.
WITH commit_mode AS (SELECT set_config('synchronous_commit', 'on', true)), fence AS (

-- name: effect_claim_insert
)
INSERT INTO langgraph_durable_effects
    (key, effect_name, input_hash, status, attempt, lease_owner, lease_expires_at,
     thread_id, checkpoint_ns, node, step, completion_event, default_key)
SELECT %(key)s, %(effect_name)s, %(input_hash)s, 'running', 1, %(owner)s,
    clock_timestamp() + make_interval(secs => %(lease_seconds)s),
    %(thread_id)s, %(checkpoint_ns)s, %(node)s, %(step)s, %(completion_event)s,
    %(default_key)s
FROM commit_mode
WHERE (SELECT ok FROM fence)
ON CONFLICT (key) DO NOTHING

-- name: thread_lease_held
-- Whether a fencing token is still the thread's: asked when a fenced claim or takeover
-- changed nothing, to tell "fenced out" from "the row changed".
SELECT EXISTS (
    SELECT 1 FROM langgraph_durable_threads
    WHERE thread_id = %(thread_id)s AND fencing_token = %(fence_token)s::bigint
) AS held

-- name: effect_get
SELECT key, effect_name, input_hash, status, attempt, lease_owner, lease_expires_at,
    next_attempt_at, result_type, result, error_type, error_message, usage, replays,
    thread_id, node, step, created_at, updated_at, completed_at, resolved_by,
    completion_event, clock_timestamp() AS db_now
FROM langgraph_durable_effects
WHERE key = %(key)s

-- name: effect_clock
-- The database's clock, the one effects and runs are timed by (`durable_sleep` reads it:
-- a worker's own clock may be ahead or behind).
SELECT clock_timestamp() AS db_now

-- name: effect_take_over_head
-- The next attempt, if the row is still as seen; fenced like the claim (above).
-- Assembled by `_sql.take_over_effect`.
WITH commit_mode AS (SELECT set_config('synchronous_commit', 'on', true)), fence AS (

-- name: effect_take_over_update
)
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
    AND (SELECT ok FROM fence)
RETURNING attempt

-- name: effect_complete_events_head
-- The result, and the outbox events announcing it (`@effect(event=...)`), in one
-- transaction: the events are stored only if the completion is (invariant I7). Assembled
-- by `_sql.complete_effect`: without events the UPDATE alone is the statement, its row
-- count saying whether it stored the result (a CTE and a returned row would cost the call
-- about 25 us more); with events it is the CTE `done`, the events follow, and the final
-- SELECT's row count says the same.
WITH done AS (

-- name: effect_complete_update
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
FROM (SELECT set_config('synchronous_commit', 'on', true)) AS commit_mode
WHERE key = %(key)s AND attempt = %(seen_attempt)s AND status = ANY(%(seen_statuses)s)

-- name: effect_complete_events
    RETURNING attempt, thread_id, created_at
), events AS (
    -- Each id mixed with when the row was created, as a number (no time zone in it): an
    -- effect that acts again after its row was deleted (thread deleted, run rolled back)
    -- gets new ids, where the first row's made the outbox drop its events.
    INSERT INTO langgraph_durable_outbox (event_id, event_type, key, payload, thread_id, task_id)
    SELECT
        md5(e.event_id::text || '@' || extract(epoch FROM e.created_at)::text)::uuid,
        e.event_type, e.key, e.payload::jsonb, e.thread_id, NULL
    FROM (
        SELECT
            d.thread_id,
            d.created_at,
            unnest(%(e_ids)b::uuid[]) AS event_id,
            unnest(%(e_types)b::text[]) AS event_type,
            unnest(%(e_keys)b::text[]) AS key,
            unnest(%(e_payloads)b::text[]) AS payload
        FROM done d
    ) AS e
    ON CONFLICT (event_id) DO NOTHING
)
SELECT attempt FROM done

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
RETURNING attempt

-- name: effect_release
-- Control flow (an interrupt) left the call, or it was stopped while its claim was under
-- way: the next call starts a fresh attempt. With `owner`, only the attempt that call
-- holds: a claim whose reply was lost may not be the call's (another call's claim won).
WITH commit_mode AS (SELECT set_config('synchronous_commit', 'on', true))
UPDATE langgraph_durable_effects SET
    status = 'retry_wait', next_attempt_at = clock_timestamp(),
    lease_owner = NULL, lease_expires_at = NULL, updated_at = clock_timestamp()
FROM commit_mode
WHERE key = %(key)s AND attempt = %(seen_attempt)s AND status = 'running'
    AND (%(owner)s::text IS NULL OR lease_owner = %(owner)s::text)

-- name: effect_replayed
UPDATE langgraph_durable_effects SET replays = replays + 1 WHERE key = %(key)s

-- name: effect_allow_retry
-- Resolution by hand: the receiver never acted, so the next call may attempt again; only
-- if the row is still the attempt the operator looked at.
WITH commit_mode AS (SELECT set_config('synchronous_commit', 'on', true))
UPDATE langgraph_durable_effects SET
    status = 'retry_wait', next_attempt_at = clock_timestamp(), resolved_by = %(resolved_by)s,
    lease_owner = NULL, lease_expires_at = NULL, updated_at = clock_timestamp()
FROM commit_mode
WHERE key = %(key)s AND attempt = %(seen_attempt)s AND status = ANY(%(seen_statuses)s)
RETURNING attempt

-- name: effects_open
-- Effects that need attention or are under way, oldest first, for operators. A running
-- attempt whose lease lapsed died without an outcome: unknown (I3), and `resolve` takes it.
SELECT key, effect_name, status, attempt, lease_owner, lease_expires_at, next_attempt_at,
    error_type, error_message, thread_id, node, step, updated_at,
    status = 'running' AND lease_expires_at < clock_timestamp() AS lease_lapsed
FROM langgraph_durable_effects
WHERE status IN ('running', 'unknown', 'deferred', 'retry_wait')
    AND (%(thread_id)s::text IS NULL OR thread_id = %(thread_id)s)
ORDER BY updated_at
LIMIT %(limit)s

-- name: effects_of_thread
-- Every effect of a thread in the order its steps ran them, for the operator's history.
SELECT key, effect_name, status, attempt, replays, lease_owner, next_attempt_at,
    error_type, error_message, resolved_by, usage, thread_id, checkpoint_ns, node, step,
    created_at, updated_at, completed_at
FROM langgraph_durable_effects
WHERE thread_id = %(thread_id)s
ORDER BY step NULLS LAST, created_at, key
LIMIT %(limit)s

-- name: effect_details
-- One effect's row as an operator sees it (the result stays encoded: the caller loads it).
SELECT key, effect_name, input_hash, status, attempt, replays, lease_owner,
    lease_expires_at, next_attempt_at, result_type, result, error_type, error_message,
    resolved_by, usage, thread_id, checkpoint_ns, node, step, created_at, updated_at,
    completed_at
FROM langgraph_durable_effects
WHERE key = %(key)s

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
-- Threads whose latest root checkpoint has interrupts waiting for an answer, oldest first
-- (within a thread, by task and index: answering takes the first). The threads that ever
-- asked are found first, one step each in the interrupt index, newest thread first, which
-- also gives the newest checkpoint where each asked (`asked`: a skip scan, as Postgres has
-- none of its own); a thread waits only if that checkpoint is its latest root checkpoint
-- (found as `where_latest` finds it). Only the waiting threads' interrupts are read,
-- joined and sorted. Checking every interrupt ever stored against its thread's latest
-- checkpoint cost a step per answered question (20,121 pages against 237 on the plan
-- tests' data); joining each asking thread's latest checkpoint before looking for
-- interrupts there cost 12 pages per thread that asked once; sorting by the checkpoints'
-- time had let the planner walk every root checkpoint of the database oldest first.
WITH RECURSIVE asked (thread_id, checkpoint_id) AS (
    (
        SELECT w.thread_id, w.checkpoint_id FROM checkpoint_writes w
        WHERE w.channel = '__interrupt__' AND w.checkpoint_ns = ''
        ORDER BY w.thread_id DESC, w.checkpoint_id DESC
        LIMIT 1
    )
    UNION ALL
    SELECT newest.thread_id, newest.checkpoint_id
    FROM asked, LATERAL (
        SELECT w.thread_id, w.checkpoint_id FROM checkpoint_writes w
        WHERE w.channel = '__interrupt__' AND w.checkpoint_ns = ''
            AND w.thread_id < asked.thread_id
        ORDER BY w.thread_id DESC, w.checkpoint_id DESC
        LIMIT 1
    ) AS newest
),
waiting AS MATERIALIZED (
    SELECT asked.thread_id, asked.checkpoint_id
    FROM asked
    WHERE asked.checkpoint_id = (
        SELECT c.checkpoint_id FROM checkpoints c
        WHERE c.thread_id = asked.thread_id
            AND c.checkpoint_ns >= '' AND c.checkpoint_ns <= ''
        ORDER BY c.thread_id DESC, c.checkpoint_ns DESC, c.checkpoint_id DESC
        LIMIT 1
    )
)
SELECT w.thread_id, w.checkpoint_id, w.task_id, w.type, w.blob,
    (c.checkpoint ->> 'ts')::timestamptz AS waiting_since,
    clock_timestamp() AS db_now
FROM waiting
JOIN checkpoint_writes w
    ON w.thread_id = waiting.thread_id
    AND w.checkpoint_ns = ''
    AND w.checkpoint_id = waiting.checkpoint_id
    AND w.channel = '__interrupt__'
JOIN checkpoints c
    ON c.thread_id = waiting.thread_id
    AND c.checkpoint_ns = ''
    AND c.checkpoint_id = waiting.checkpoint_id
-- Unless its task has finished (see `pending_interrupts_thread`).
WHERE (
    SELECT 1 FROM checkpoint_writes done
    WHERE done.thread_id = w.thread_id
        AND done.checkpoint_ns = ''
        AND done.checkpoint_id = w.checkpoint_id
        AND done.task_id = w.task_id
        AND done.channel NOT IN (
            '__interrupt__', '__resume__', '__error__', '__error_source_node__'
        )
    LIMIT 1
) IS NULL
ORDER BY waiting_since, w.thread_id, w.task_id, w.idx
LIMIT %(limit)s

-- name: pending_interrupts_thread
-- `pending_interrupts` of one thread: its latest root checkpoint once, then its writes.
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
    AND w.thread_id = %(thread_id)s
    AND w.checkpoint_id = (
        SELECT latest.checkpoint_id FROM checkpoints latest
        WHERE latest.thread_id = %(thread_id)s
            AND latest.checkpoint_ns >= '' AND latest.checkpoint_ns <= ''
        ORDER BY latest.thread_id DESC, latest.checkpoint_ns DESC, latest.checkpoint_id DESC
        LIMIT 1
    )
    -- Unless its task has finished: LangGraph counts a task with any write to a channel
    -- other than its control channels (`_langgraph.CONTROL_WRITES`) as done, its question
    -- answered, while a parallel task's question still waits at the same checkpoint.
    AND (
        SELECT 1 FROM checkpoint_writes done
        WHERE done.thread_id = w.thread_id
            AND done.checkpoint_ns = ''
            AND done.checkpoint_id = w.checkpoint_id
            AND done.task_id = w.task_id
            AND done.channel NOT IN (
                '__interrupt__', '__resume__', '__error__', '__error_source_node__'
            )
        LIMIT 1
    ) IS NULL
ORDER BY w.task_id, w.idx
LIMIT %(limit)s

-- name: effect_extend_lease
-- The heartbeat of a long attempt: still ours, still running, so the lease moves on.
-- Synchronous too: a lost extension after a server crash would make a live attempt look
-- abandoned.
WITH commit_mode AS (SELECT set_config('synchronous_commit', 'on', true))
UPDATE langgraph_durable_effects SET
    lease_expires_at = clock_timestamp() + make_interval(secs => %(lease_seconds)s),
    updated_at = clock_timestamp()
FROM commit_mode
WHERE key = %(key)s AND attempt = %(seen_attempt)s AND status = 'running'
RETURNING attempt

-- ---------------------------------------------------------------------------------------
-- Runs (langgraph_durable/runs/). A thread's runs go one at a time, oldest first; a worker
-- takes one with its thread's lease at a new fencing token, in one statement.

-- name: thread_lease_row
-- Serialises every change to one thread's runs (create with a multitask strategy, cancel,
-- resume): the row is made if missing, then locked for the transaction.
WITH made AS (
    INSERT INTO langgraph_durable_threads (thread_id) VALUES (%(thread_id)s)
    ON CONFLICT (thread_id) DO NOTHING
)
SELECT thread_id, fencing_token, owner, run_id, lease_expires_at
FROM langgraph_durable_threads WHERE thread_id = %(thread_id)s
FOR UPDATE

-- name: thread_fence_bump
-- Takes the thread away from whoever holds it: its next write is refused (fenced out).
UPDATE langgraph_durable_threads SET
    fencing_token = fencing_token + 1, owner = NULL, run_id = NULL, lease_expires_at = NULL,
    updated_at = clock_timestamp()
WHERE thread_id = %(thread_id)s
RETURNING fencing_token

-- name: thread_active_runs
SELECT run_id, status FROM langgraph_durable_runs
WHERE thread_id = %(thread_id)s
    AND status IN ('pending', 'running', 'deferred', 'blocked')
ORDER BY created_at, run_id

-- name: thread_question_run
-- The run of the registry a thread's waiting question belongs to: a run of the thread on
-- its way (the oldest), else the interrupted run that wrote the thread's latest root
-- checkpoint (LangGraph copies the run id into the metadata). Nothing for a plain thread.
SELECT * FROM (
    SELECT r.*, 0 AS rank FROM langgraph_durable_runs r
    WHERE r.thread_id = %(thread_id)s
        AND r.status IN ('pending', 'running', 'deferred', 'blocked')
    UNION ALL
    SELECT r.*, 1 AS rank FROM langgraph_durable_runs r
    WHERE r.status = 'interrupted'
        AND r.thread_id = %(thread_id)s
        AND r.run_id = (
            SELECT latest.metadata ->> 'run_id' FROM checkpoints latest
            WHERE latest.thread_id = %(thread_id)s
                AND latest.checkpoint_ns >= '' AND latest.checkpoint_ns <= ''
            ORDER BY latest.thread_id DESC, latest.checkpoint_ns DESC,
                latest.checkpoint_id DESC
            LIMIT 1
        )
) AS found
ORDER BY rank, created_at, run_id
LIMIT 1

-- name: run_insert
INSERT INTO langgraph_durable_runs (
    run_id, thread_id, graph_name, graph_version, status, multitask_strategy, durability,
    input_type, input, input_after, config, metadata, max_attempts, deadline_at,
    timeout_seconds)
VALUES (
    %(run_id)s, %(thread_id)s, %(graph_name)s, %(graph_version)s, 'pending',
    %(multitask_strategy)s, %(durability)s, %(input_type)s, %(input)s, %(input_after)s,
    %(config)s::jsonb, %(metadata)s::jsonb, %(max_attempts)s,
    CASE WHEN %(timeout)s::float8 IS NULL THEN NULL
        ELSE clock_timestamp() + make_interval(secs => %(timeout)s::float8) END,
    %(timeout)s::float8)
RETURNING *

-- name: runs_wake
-- Workers LISTEN here: a run became takeable (or a thread's next run may go). Sent only
-- then: Postgres wakes every listening session of the database for each NOTIFY, whatever
-- its channel, and each wake costs that session a transaction.
SELECT pg_notify('langgraph_durable_runs', %(run_id)s)

-- name: runs_listen
LISTEN langgraph_durable_runs

-- name: runs_unlisten
UNLISTEN langgraph_durable_runs

-- name: run_get
SELECT * FROM langgraph_durable_runs WHERE run_id = %(run_id)s

-- name: run_list
SELECT * FROM langgraph_durable_runs
WHERE (%(status)s::text IS NULL OR status = %(status)s)
    AND (%(thread_id)s::text IS NULL OR thread_id = %(thread_id)s)
    AND (%(graph_name)s::text IS NULL OR graph_name = %(graph_name)s)
ORDER BY created_at DESC, run_id DESC
LIMIT %(limit)s

-- name: runs_set_status
-- A person (or a newer run) stops runs that no worker must go on with; only active ones:
-- a run that has finished keeps its outcome.
UPDATE langgraph_durable_runs SET
    status = %(status)s, status_reason = %(reason)s,
    owner = NULL, lease_expires_at = NULL,
    finished_at = CASE WHEN %(status)s IN ('success', 'error', 'timeout', 'interrupted',
        'cancelled') THEN clock_timestamp() END,
    updated_at = clock_timestamp()
WHERE run_id = ANY(%(run_ids)s) AND status IN ('pending', 'running', 'deferred', 'blocked')
RETURNING *

-- name: run_requeue
-- Back to the queue: retry after an error, unblock, resume an interrupted run (with a new
-- input, e.g. a Command), or move to another graph version. A retry or a resume gives a run
-- with a timeout its whole timeout again, from now: a timed-out run retried with its old
-- deadline would time out at once.
UPDATE langgraph_durable_runs SET
    status = 'pending', status_reason = NULL, retry_at = NULL, stuck_since = NULL,
    finished_at = NULL, error_type = NULL, error_message = NULL,
    attempt = CASE WHEN %(reset_attempts)s THEN 0 ELSE attempt END,
    deadline_at = CASE WHEN %(renew_deadline)s AND timeout_seconds IS NOT NULL
        THEN clock_timestamp() + make_interval(secs => timeout_seconds) ELSE deadline_at END,
    input_type = coalesce(%(input_type)s, input_type),
    input = CASE WHEN %(input_type)s::text IS NULL THEN input ELSE %(input)s END,
    input_after = CASE WHEN %(input_type)s::text IS NULL THEN input_after
        ELSE %(input_after)s END,
    graph_version = coalesce(%(graph_version)s, graph_version),
    updated_at = clock_timestamp()
WHERE run_id = %(run_id)s AND status = ANY(%(from_statuses)s)
RETURNING *

-- name: run_claim
-- Take the oldest run this worker can run: pending, deferred and due, or running under a
-- lease that ran out (its worker died) with attempts left, or blocked only for want of a
-- worker of its version. Not while another run of its thread is in flight: running (a run
-- whose worker died is recovered first: one running run per thread, by a unique index), or
-- blocked mid-run and queued again since (the thread's row still names it,
-- `runs_block_unrunnable`); nor, unless it is the run in flight, while an older run of its
-- thread waits; nor while someone alive holds the thread's lease. The run and its thread's row are locked with SKIP
-- LOCKED (every run has its thread's row: `thread_lease_row` makes it when the run is
-- created, and nothing deletes it), so a claim never waits for a lock and so can never
-- close a deadlock with a registry change that holds the thread's row. The thread's lease
-- is taken at the next fencing token in the same statement.
WITH candidate AS (
    SELECT r.run_id, r.thread_id, r.status AS was_status, r.heartbeat_at AS last_heartbeat_at
    FROM langgraph_durable_runs r
    JOIN unnest(%(names)s::text[], %(versions)s::text[]) AS g(name, version)
        ON g.name = r.graph_name AND g.version = r.graph_version
    JOIN langgraph_durable_threads t ON t.thread_id = r.thread_id
    WHERE (
        (r.status = 'pending' AND (r.retry_at IS NULL OR r.retry_at <= clock_timestamp()))
        OR (r.status = 'deferred' AND r.retry_at <= clock_timestamp())
        OR (r.status = 'running' AND r.lease_expires_at < clock_timestamp()
            AND r.attempt < r.max_attempts)
        OR (r.status = 'blocked' AND r.status_reason LIKE 'version:%%'
            AND (r.retry_at IS NULL OR r.retry_at <= clock_timestamp()))
    )
    AND NOT EXISTS (
        SELECT 1 FROM langgraph_durable_runs e
        WHERE e.thread_id = r.thread_id AND e.run_id <> r.run_id
            AND (
                e.status = 'running'
                OR (e.run_id = t.run_id AND e.status IN ('pending', 'deferred', 'blocked'))
                OR (r.status <> 'running' AND r.run_id IS DISTINCT FROM t.run_id
                    AND e.status IN ('pending', 'deferred', 'blocked')
                    AND (e.created_at, e.run_id) < (r.created_at, r.run_id))
            )
    )
    AND (t.owner IS NULL OR t.lease_expires_at < clock_timestamp())
    ORDER BY r.created_at, r.run_id
    LIMIT 1
    FOR UPDATE OF r, t SKIP LOCKED
), lease AS (
    UPDATE langgraph_durable_threads t SET
        fencing_token = t.fencing_token + 1, owner = %(owner)s, run_id = candidate.run_id,
        lease_expires_at = clock_timestamp() + make_interval(secs => %(lease_seconds)s),
        updated_at = clock_timestamp()
    FROM candidate
    WHERE t.thread_id = candidate.thread_id
    RETURNING t.thread_id, t.fencing_token
)
UPDATE langgraph_durable_runs r SET
    status = 'running', status_reason = NULL, attempt = r.attempt + 1, owner = %(owner)s,
    fencing_token = lease.fencing_token,
    lease_expires_at = clock_timestamp() + make_interval(secs => %(lease_seconds)s),
    heartbeat_at = clock_timestamp(), last_progress_at = clock_timestamp(),
    stuck_since = NULL, retry_at = NULL,
    started_at = coalesce(r.started_at, clock_timestamp()), updated_at = clock_timestamp()
FROM candidate JOIN lease USING (thread_id)
WHERE r.run_id = candidate.run_id
RETURNING r.*, CASE WHEN candidate.was_status = 'running'
    THEN extract(epoch FROM clock_timestamp() - candidate.last_heartbeat_at)::float8
    END AS recovered_after_seconds

-- name: runs_next_due
-- Seconds until the next run this worker could take becomes takeable by time alone (a
-- lease that runs out, a retry time, the lease of whoever holds its thread), so an idle
-- worker wakes then instead of polling. Only what `run_claim` would take counts: its graph
-- versions (names and versions paired), not a thread behind another run in flight or an
-- older waiting one, and not before its thread's lease runs out; a run another worker's
-- version takes (blocked here) or a version this worker lacks would otherwise be due at
-- once for ever, and the idle worker look again every few milliseconds. A running run
-- without attempts left is not takeable when its lease runs out: the sweep ends it. Keep
-- the conditions in step with `run_claim`.
-- The threads are judged for the 64 runs due first by their own times only: judged for
-- every waiting run (100,000 sleeping ones), the statement took 0.25 s where the runs
-- alone take 0.03, on every wake of every idle worker. A run without a time of its own (a
-- pending run queued behind another) is left out: queued runs would fill the 64 and hide
-- a sleeping run's wake-up; a run queued behind a lease is woken by the NOTIFY its
-- release sends, or after `idle_wait` when its holder died. When all 64 wait behind
-- other runs, no time is given and the worker looks again after `idle_wait`, or at once
-- when a run is created or finishes (NOTIFY).
SELECT extract(epoch FROM min(d.due) - clock_timestamp())::float8 AS seconds
FROM (
    SELECT c.run_id, c.thread_id, c.status, c.created_at, t.run_id AS thread_run_id,
        greatest(c.run_due, CASE WHEN t.owner IS NOT NULL THEN t.lease_expires_at END) AS due
    FROM (
        SELECT r.run_id, r.thread_id, r.status, r.created_at,
            CASE WHEN r.status = 'running' THEN r.lease_expires_at ELSE r.retry_at END
                AS run_due
        FROM langgraph_durable_runs r
        JOIN unnest(%(names)s::text[], %(versions)s::text[]) AS g(name, version)
            ON g.name = r.graph_name AND g.version = r.graph_version
        WHERE (
            r.status IN ('pending', 'deferred')
            OR (r.status = 'running' AND r.attempt < r.max_attempts)
            OR (r.status = 'blocked' AND r.status_reason LIKE 'version:%%')
        )
        AND CASE WHEN r.status = 'running' THEN r.lease_expires_at ELSE r.retry_at END
            IS NOT NULL
        ORDER BY run_due
        LIMIT 64
    ) AS c
    JOIN langgraph_durable_threads t ON t.thread_id = c.thread_id
) AS d
WHERE d.due IS NOT NULL AND NOT EXISTS (
    SELECT 1 FROM langgraph_durable_runs e
    WHERE e.thread_id = d.thread_id AND e.run_id <> d.run_id
        AND (
            e.status = 'running'
            OR (e.run_id = d.thread_run_id AND e.status IN ('pending', 'deferred', 'blocked'))
            OR (d.status <> 'running' AND d.run_id IS DISTINCT FROM d.thread_run_id
                AND e.status IN ('pending', 'deferred', 'blocked')
                AND (e.created_at, e.run_id) < (d.created_at, d.run_id))
        )
)

-- name: run_set_version
-- A worker moved a run's state forward (a migration hook) and continues it as its version.
UPDATE langgraph_durable_runs SET graph_version = %(graph_version)s, updated_at = clock_timestamp()
WHERE run_id = %(run_id)s AND fencing_token = %(fence_token)s AND status = 'running'
RETURNING run_id

-- name: run_mark_migrated
-- A migration hook has returned: its mark (`runs/_model.py` `migration_marker`) goes into
-- the metadata of the thread's latest root checkpoint, behind the run's fence. Not a new
-- checkpoint: LangGraph takes one for a step, guesses the node that made it, runs what
-- follows that node again and drops the pending writes of the checkpoint before it. A
-- worker that dies before the run is recorded as its new version leaves the mark there,
-- and the next worker does not run the hook again (`run_migrated_already`).
UPDATE checkpoints c
SET metadata = c.metadata || jsonb_build_object('langgraph_durable_migration', %(marker)s::text)
FROM (
    SELECT checkpoint_id FROM checkpoints
    WHERE thread_id = %(thread_id)s AND checkpoint_ns >= '' AND checkpoint_ns <= ''
    ORDER BY thread_id DESC, checkpoint_ns DESC, checkpoint_id DESC
    LIMIT 1
) AS latest
WHERE c.thread_id = %(thread_id)s AND c.checkpoint_ns = ''
    AND c.checkpoint_id = latest.checkpoint_id
    AND EXISTS (
        SELECT 1 FROM langgraph_durable_runs
        WHERE run_id = %(run_id)s AND fencing_token = %(fence_token)s AND status = 'running'
    )
RETURNING c.checkpoint_id

-- name: run_migrated_already
-- Whether the thread's latest root checkpoint carries this migration's mark
-- (`run_mark_migrated`): its hook returned, and its worker died before recording the
-- run's new version.
SELECT latest.metadata ->> 'langgraph_durable_migration' = %(marker)s AS migrated FROM (
    SELECT metadata FROM checkpoints
    WHERE thread_id = %(thread_id)s AND checkpoint_ns >= '' AND checkpoint_ns <= ''
    ORDER BY thread_id DESC, checkpoint_ns DESC, checkpoint_id DESC
    LIMIT 1
) AS latest

-- name: run_heartbeat
-- The run and its thread lease move on together, while they are still this worker's. The
-- thread's row first, then the run's: the order every registry change takes them in.
WITH thread AS (
    UPDATE langgraph_durable_threads SET
        lease_expires_at = clock_timestamp() + make_interval(secs => %(lease_seconds)s),
        updated_at = clock_timestamp()
    WHERE thread_id = %(thread_id)s AND fencing_token = %(fence_token)s
    RETURNING fencing_token
)
UPDATE langgraph_durable_runs r SET
    lease_expires_at = clock_timestamp() + make_interval(secs => %(lease_seconds)s),
    heartbeat_at = clock_timestamp(), updated_at = clock_timestamp()
FROM thread
WHERE r.run_id = %(run_id)s AND r.fencing_token = %(fence_token)s AND r.status = 'running'
RETURNING thread.fencing_token

-- name: run_finish
-- The worker's last word on an execution, taken only while the run is still its own; the
-- thread's lease is let go in the same statement. The thread's row is locked first (the
-- order every registry change takes them in, so a finish and a cancel cannot deadlock).
-- An execution that did not fail (it waits at an interrupt or until a retry time, was
-- handed back, or lost the database) gives its attempt back: `attempt` counts executions
-- that failed or whose worker died, and the one that succeeded.
WITH thread AS (
    SELECT thread_id FROM langgraph_durable_threads
    WHERE thread_id = %(thread_id)s
    FOR UPDATE
), run AS (
    UPDATE langgraph_durable_runs SET
        status = %(status)s, status_reason = %(reason)s,
        attempt = CASE WHEN %(refund)s THEN greatest(attempt - 1, 0) ELSE attempt END,
        retry_at = CASE WHEN %(retry_in)s::float8 IS NOT NULL
            THEN clock_timestamp() + make_interval(secs => %(retry_in)s::float8)
            ELSE %(retry_at)s::timestamptz END,
        output_type = %(output_type)s, output = %(output)s,
        error_type = %(error_type)s, error_message = %(error_message)s,
        owner = NULL, lease_expires_at = NULL,
        finished_at = CASE WHEN %(status)s IN ('success', 'error', 'timeout', 'interrupted',
            'cancelled') THEN clock_timestamp() END,
        updated_at = clock_timestamp()
    WHERE run_id = %(run_id)s AND fencing_token = %(fence_token)s AND status = 'running'
        AND thread_id = (SELECT thread_id FROM thread)
    RETURNING thread_id
), lease AS (
    UPDATE langgraph_durable_threads t SET
        owner = NULL, run_id = NULL, lease_expires_at = NULL, updated_at = clock_timestamp()
    FROM run
    WHERE t.thread_id = run.thread_id AND t.fencing_token = %(fence_token)s
)
SELECT run.thread_id, EXISTS (
    SELECT 1 FROM langgraph_durable_runs n
    WHERE n.thread_id = run.thread_id AND n.run_id <> %(run_id)s
        AND n.status IN ('pending', 'deferred', 'blocked')
) AS thread_has_next
FROM run

-- name: thread_take_lease
-- `exclusive()`: a plain graph.invoke takes the thread's lease, if nobody alive holds it
-- and no run of the thread is running.
INSERT INTO langgraph_durable_threads AS t
    (thread_id, fencing_token, owner, lease_expires_at, updated_at)
SELECT %(thread_id)s, 1, %(owner)s,
    clock_timestamp() + make_interval(secs => %(lease_seconds)s), clock_timestamp()
WHERE NOT EXISTS (
    SELECT 1 FROM langgraph_durable_runs r
    WHERE r.thread_id = %(thread_id)s AND r.status = 'running'
        AND r.lease_expires_at >= clock_timestamp()
)
ON CONFLICT (thread_id) DO UPDATE SET
    fencing_token = t.fencing_token + 1, owner = EXCLUDED.owner, run_id = NULL,
    lease_expires_at = EXCLUDED.lease_expires_at, updated_at = clock_timestamp()
WHERE t.owner IS NULL OR t.lease_expires_at < clock_timestamp()
RETURNING fencing_token

-- name: thread_extend_lease
UPDATE langgraph_durable_threads SET
    lease_expires_at = clock_timestamp() + make_interval(secs => %(lease_seconds)s),
    updated_at = clock_timestamp()
WHERE thread_id = %(thread_id)s AND fencing_token = %(fence_token)s
RETURNING fencing_token

-- name: thread_release_lease
-- `exclusive()` lets the thread go; says whether a run of the thread waits for it (then the
-- caller wakes the workers).
WITH released AS (
    UPDATE langgraph_durable_threads SET
        owner = NULL, run_id = NULL, lease_expires_at = NULL, updated_at = clock_timestamp()
    WHERE thread_id = %(thread_id)s AND fencing_token = %(fence_token)s
    RETURNING thread_id
)
SELECT EXISTS (
    SELECT 1 FROM langgraph_durable_runs n
    WHERE n.thread_id = released.thread_id AND n.status IN ('pending', 'deferred')
) AS thread_has_next
FROM released

-- name: runs_time_out
-- Runs past their deadline end as timeout; a running one loses its thread (fenced out).
-- Only the thread lease the late run itself holds is taken: a queued run's deadline must
-- not fence out another run of the thread that is running. Runs and threads are locked
-- with SKIP LOCKED: one whose thread is busy in a registry change now is timed out by the
-- next sweep, and the sweep never waits on a thread's row while holding a run's.
WITH late AS (
    SELECT r.run_id, r.thread_id
    FROM langgraph_durable_runs r
    JOIN langgraph_durable_threads t ON t.thread_id = r.thread_id
    WHERE r.status IN ('pending', 'running', 'deferred', 'blocked')
        AND r.deadline_at < clock_timestamp()
    FOR UPDATE OF r, t SKIP LOCKED
), timed_out AS (
    UPDATE langgraph_durable_runs r SET
        status = 'timeout', status_reason = 'not finished by its deadline',
        owner = NULL, lease_expires_at = NULL, finished_at = clock_timestamp(),
        updated_at = clock_timestamp()
    FROM late WHERE r.run_id = late.run_id
    RETURNING r.run_id, r.thread_id
), fenced AS (
    UPDATE langgraph_durable_threads t SET
        fencing_token = t.fencing_token + 1, owner = NULL, run_id = NULL,
        lease_expires_at = NULL, updated_at = clock_timestamp()
    FROM late WHERE t.thread_id = late.thread_id AND t.run_id = late.run_id
)
SELECT run_id, thread_id FROM timed_out

-- name: runs_end_crash_loops
-- A run whose worker died in its last allowed execution (attempt = max_attempts) is not
-- taken again (a crash loop: the run itself may be what kills its workers): it ends as
-- error, and its thread's lease is taken from the dead worker. The error an earlier
-- attempt recorded is kept (it may be why); the reason says the last worker died, and
-- `WorkerLost` is the error only when no attempt recorded one. Locked like `runs_time_out`.
WITH looping AS (
    SELECT r.run_id, r.thread_id
    FROM langgraph_durable_runs r
    JOIN langgraph_durable_threads t ON t.thread_id = r.thread_id
    WHERE r.status = 'running' AND r.lease_expires_at < clock_timestamp()
        AND r.attempt >= r.max_attempts
    FOR UPDATE OF r, t SKIP LOCKED
), ended AS (
    UPDATE langgraph_durable_runs r SET
        status = 'error',
        status_reason = 'crash loop: its worker ' || coalesce(r.owner, '(unknown)')
            || ' stopped without finishing it (killed, crashed or cut off) in its last '
            || 'allowed attempt (' || r.attempt || ' of ' || r.max_attempts || '). Find what '
            || 'stops the workers (their logs, memory limits), then retry the run '
            || '(registry.retry).',
        error_type = coalesce(r.error_type, 'WorkerLost'),
        error_message = CASE WHEN r.error_type IS NULL
            THEN 'Its worker stopped without finishing it (killed, crashed or cut off) in '
                || 'its last allowed attempt (' || r.attempt || ' of ' || r.max_attempts
                || '); no attempt recorded an error.'
            ELSE r.error_message END,
        owner = NULL, lease_expires_at = NULL, finished_at = clock_timestamp(),
        updated_at = clock_timestamp()
    FROM looping WHERE r.run_id = looping.run_id
    RETURNING r.run_id, r.thread_id, r.attempt, r.error_type
), fenced AS (
    UPDATE langgraph_durable_threads t SET
        fencing_token = t.fencing_token + 1, owner = NULL, run_id = NULL,
        lease_expires_at = NULL, updated_at = clock_timestamp()
    FROM looping WHERE t.thread_id = looping.thread_id AND t.run_id = looping.run_id
)
SELECT run_id, thread_id, attempt, error_type FROM ended

-- name: interrupted_run_still_asks
-- A condition on an interrupted run `r` (a block of `runs_flag_stuck`, `runs_stuck` and
-- `doctor_registry`, joined by `_sql.waits_for_a_person`): it still waits for a person.
-- Not once a newer run of its thread has started (and was not rolled back since: its
-- checkpoints are gone, the thread is back where it was), nor once a newer run's
-- "interrupt" strategy stopped it: nobody is asked its question any more.
(
    NOT EXISTS (
        SELECT 1 FROM langgraph_durable_runs n
        WHERE n.thread_id = r.thread_id AND n.created_at > r.created_at
            AND n.started_at IS NOT NULL AND NOT (n.status = 'cancelled'
                AND coalesce(n.status_reason, '') LIKE 'rollback: superseded by run %%')
    )
    AND coalesce(r.status_reason, '') NOT LIKE 'interrupt: superseded by run %%'
)

-- name: runs_flag_stuck_head
-- Running without progress (or waiting for a person) longer than its graph allows: flagged
-- once, until progress clears the flag. SKIP LOCKED: two workers sweeping at once (or a
-- sweep and a finish) never wait on each other's rows, so they cannot deadlock; a run
-- skipped now is flagged by the next sweep. Assembled as `runs_flag_stuck`.
WITH late AS (
    SELECT r.run_id
    FROM langgraph_durable_runs r
    JOIN unnest(%(names)s::text[], %(running_seconds)s::float8[],
            %(waiting_seconds)s::float8[]) AS g(name, running_seconds, waiting_seconds)
        ON r.graph_name = g.name
    WHERE r.stuck_since IS NULL AND (
        (r.status = 'running'
            AND r.last_progress_at < clock_timestamp() - make_interval(secs => g.running_seconds))
        OR (r.status = 'interrupted' AND g.waiting_seconds IS NOT NULL
            AND r.updated_at < clock_timestamp() - make_interval(secs => g.waiting_seconds)
            AND

-- name: runs_flag_stuck_tail
        )
    )
    FOR UPDATE OF r SKIP LOCKED
)
UPDATE langgraph_durable_runs r SET stuck_since = clock_timestamp()
FROM late WHERE r.run_id = late.run_id
RETURNING r.run_id, r.thread_id, r.graph_name, r.status, r.last_progress_at, r.updated_at

-- name: runs_stuck_head
-- Flagged runs still running or waiting for a person. Assembled as `runs_stuck`.
SELECT * FROM langgraph_durable_runs r WHERE r.stuck_since IS NOT NULL
    AND (r.status = 'running' OR (r.status = 'interrupted' AND

-- name: runs_stuck_tail
    ))
ORDER BY r.stuck_since
LIMIT %(limit)s

-- name: worker_heartbeat
INSERT INTO langgraph_durable_workers (worker_id, owner, graphs)
VALUES (%(worker_id)s, %(owner)s, %(graphs)s::jsonb)
ON CONFLICT (worker_id) DO UPDATE SET graphs = EXCLUDED.graphs, heartbeat_at = clock_timestamp()

-- name: worker_alive
-- A busy worker says it is alive with every run heartbeat, not only when it sweeps, so
-- other workers do not take it for gone (and block the runs only it takes).
UPDATE langgraph_durable_workers SET heartbeat_at = clock_timestamp()
WHERE worker_id = %(worker_id)s

-- name: sweep_without_jit
-- The sweep's statements join JSON arrays, whose row estimates make PostgreSQL's JIT
-- compile them (half a second per sweep on PostgreSQL 15) for a few rows of work.
SET LOCAL jit = off

-- name: worker_gone
DELETE FROM langgraph_durable_workers WHERE worker_id = %(worker_id)s

-- name: workers_list
SELECT worker_id, owner, graphs, started_at, heartbeat_at,
    heartbeat_at >= clock_timestamp() - make_interval(secs => %(live_seconds)s) AS live
FROM langgraph_durable_workers
ORDER BY started_at

-- name: runs_block_unrunnable
-- Runs of a graph whose version no live worker takes are blocked, saying which versions
-- the live workers do take; a worker of their version takes them back. A worker counts as
-- live within the window it announced itself (its lease and idle wait decide how often it
-- beats), so workers with different settings agree on who is alive. A running run whose
-- worker died (its lease ran out) with attempts left is blocked too: else it would wait,
-- running and unclaimed, for a worker that never comes (I6). Its thread is taken from the
-- dead worker as a claim would take it (the next fencing token: a worker that was only cut
-- off is fenced out at its next write), but keeps the run's id: the run is still in flight,
-- so no other run of the thread starts before it goes on (`run_claim`). Runs and threads
-- are locked with SKIP LOCKED, like the sweep's other statements.
WITH live AS (
    SELECT g ->> 'name' AS name, v AS version
    FROM langgraph_durable_workers w
    CROSS JOIN LATERAL jsonb_array_elements(w.graphs) AS g
    CROSS JOIN LATERAL jsonb_array_elements_text(g -> 'versions') AS v
    WHERE w.heartbeat_at >= clock_timestamp() - make_interval(
        secs => coalesce((g ->> 'live_seconds')::float8, %(live_seconds)s))
), offered AS (
    SELECT name, string_agg(DISTINCT version, ', ' ORDER BY version) AS versions
    FROM live GROUP BY name
), unrunnable AS (
    SELECT r.run_id, r.thread_id, r.status = 'running' AS was_running, o.versions
    FROM langgraph_durable_runs r
    JOIN offered o ON o.name = r.graph_name
    JOIN langgraph_durable_threads t ON t.thread_id = r.thread_id
    WHERE (
            r.status IN ('pending', 'deferred')
            OR (r.status = 'running' AND r.lease_expires_at < clock_timestamp()
                AND r.attempt < r.max_attempts
                AND (t.owner IS NULL OR t.lease_expires_at < clock_timestamp()))
        )
        AND NOT EXISTS (SELECT 1 FROM live l WHERE l.name = r.graph_name
            AND l.version = r.graph_version)
    FOR UPDATE OF r, t SKIP LOCKED
), fenced AS (
    UPDATE langgraph_durable_threads t SET
        fencing_token = t.fencing_token + 1, owner = NULL, lease_expires_at = NULL,
        updated_at = clock_timestamp()
    FROM unrunnable u
    WHERE u.was_running AND t.thread_id = u.thread_id AND t.run_id = u.run_id
)
UPDATE langgraph_durable_runs r SET
    status = 'blocked', owner = NULL, lease_expires_at = NULL,
    status_reason = 'version: this run is ' || r.graph_name || ' version ' || r.graph_version
        || ', and no live worker takes it (live workers take versions ' || u.versions
        || '). Start a worker of that version, declare a newer one compatible_with it or '
        || 'give it a migration, or move the run to a version with registry.migrate().',
    updated_at = clock_timestamp()
FROM unrunnable u
WHERE r.run_id = u.run_id
RETURNING r.run_id, r.thread_id, r.graph_name, r.graph_version, u.versions

-- name: run_latest_checkpoint
-- The latest root checkpoint a run wrote (LangGraph copies the run id into the metadata),
-- or NULL. Usually it is the thread's latest root checkpoint: one step back in the primary
-- key (as `where_latest`). Only when that one is another run's are the run's own
-- checkpoints read, through the run id's index alone (OFFSET 0 keeps the thread's
-- conditions out of that scan: a generic plan that used an index of the thread there
-- read all of it). COALESCE runs the second sub-select only when the first finds nothing.
SELECT coalesce(
    (
        SELECT latest.checkpoint_id FROM (
            SELECT checkpoint_id, metadata ->> 'run_id' AS run_id FROM checkpoints
            WHERE thread_id = %(thread_id)s AND checkpoint_ns >= '' AND checkpoint_ns <= ''
            ORDER BY thread_id DESC, checkpoint_ns DESC, checkpoint_id DESC
            LIMIT 1
        ) AS latest
        WHERE latest.run_id = %(run_id)s
    ),
    (
        SELECT own.checkpoint_id FROM (
            SELECT thread_id, checkpoint_ns, checkpoint_id FROM checkpoints
            WHERE metadata ->> 'run_id' = %(run_id)s
            OFFSET 0
        ) AS own
        WHERE own.thread_id = %(thread_id)s AND own.checkpoint_ns = ''
        ORDER BY own.checkpoint_id DESC
        LIMIT 1
    )
) AS checkpoint_id

-- name: threads_list
-- Threads by their latest root checkpoint, most recently active first. Reads every root
-- checkpoint's key and metadata once (an operator's command, not a hot path).
SELECT DISTINCT ON (latest.thread_id) latest.thread_id, latest.checkpoint_id,
    latest.checkpoint ->> 'ts' AS updated_at,
    (latest.metadata ->> 'step')::int AS step, latest.metadata ->> 'source' AS source,
    counts.checkpoints
FROM (
    SELECT thread_id, count(*) AS checkpoints, max(checkpoint_id) AS checkpoint_id
    FROM checkpoints
    WHERE checkpoint_ns = ''
        AND (%(prefix)s::text IS NULL OR starts_with(thread_id, %(prefix)s::text))
    GROUP BY thread_id
    ORDER BY max(checkpoint_id) DESC
    LIMIT %(limit)s
) AS counts
JOIN checkpoints latest ON latest.thread_id = counts.thread_id AND latest.checkpoint_ns = ''
    AND latest.checkpoint_id = counts.checkpoint_id

-- name: doctor_settings
-- The server settings that decide whether a committed step survives a crash, and limits.
SELECT name, setting, unit FROM pg_settings
WHERE name IN ('fsync', 'synchronous_commit', 'full_page_writes', 'wal_level',
    'max_connections', 'superuser_reserved_connections', 'jit', 'statement_timeout',
    'lock_timeout', 'idle_in_transaction_session_timeout', 'default_transaction_isolation',
    'server_version', 'server_version_num')

-- name: doctor_value_compression
-- Whether this server has lz4, and the value columns that do not use it (setup() sets
-- them to lz4 where it can: durable_007). PostgreSQL 14 and newer only (attcompression).
SELECT
    coalesce((SELECT 'lz4' = ANY(enumvals) FROM pg_settings
        WHERE name = 'default_toast_compression'), false) AS lz4_available,
    coalesce(array_agg(v.name ORDER BY v.name) FILTER (WHERE a.attcompression <> 'l'),
        '{}') AS not_lz4
FROM (VALUES ('checkpoints', 'checkpoint'), ('checkpoint_blobs', 'blob'),
        ('checkpoint_writes', 'blob')) AS c (tab, col)
CROSS JOIN LATERAL (SELECT c.tab || '.' || c.col AS name) AS v
JOIN pg_attribute a ON a.attrelid = to_regclass(c.tab) AND a.attname = c.col

-- name: doctor_privileges
-- The privileges this session's role lacks, of those an application needs
-- (`roles.app_role_privileges`, read from `grant_app_role`), on the tables found on the
-- search path as the saver finds them. A table that is not there is the schema check's.
SELECT current_user AS role,
    coalesce(
        array_agg(g.name || ' ' || g.privilege ORDER BY g.name, g.privilege) FILTER (
            WHERE NOT CASE g.kind
                WHEN 'sequence' THEN has_sequence_privilege(to_regclass(g.name), g.privilege)
                ELSE has_table_privilege(to_regclass(g.name), g.privilege)
            END
        ),
        '{}'
    ) AS missing,
    -- Without USAGE on their schema the tables are not found at all (to_regclass is
    -- NULL) and nothing above is missing: the schemas that hold them, as the catalog
    -- does, which this role may not use, when the saver cannot see them.
    CASE WHEN to_regclass('checkpoints') IS NULL THEN coalesce((
        SELECT array_agg(DISTINCT n.nspname::text ORDER BY n.nspname::text)
        FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE c.relname = 'checkpoints' AND c.relkind IN ('r', 'p')
            AND NOT has_schema_privilege(n.oid, 'USAGE')
    ), '{}') ELSE '{}' END AS no_usage
FROM unnest(%(kinds)s::text[], %(names)s::text[], %(privileges)s::text[])
    AS g(kind, name, privilege)
WHERE to_regclass(g.name) IS NOT NULL

-- name: doctor_connections
SELECT count(*) AS connections FROM pg_stat_activity WHERE backend_type = 'client backend'

-- name: doctor_registry_head
-- What needs a person: runs stuck (as `runs_stuck` lists them) or blocked, effects whose
-- outcome is unknown (a running attempt whose lease lapsed is one too: it died without an
-- outcome, I3), live workers. NULL where the runs tables are missing is impossible: setup
-- made them. Assembled as `doctor_registry`.
SELECT
    (SELECT count(*) FROM langgraph_durable_runs r WHERE r.stuck_since IS NOT NULL
        AND (r.status = 'running' OR (r.status = 'interrupted' AND

-- name: doctor_registry_tail
        ))) AS stuck_runs,
    (SELECT count(*) FROM langgraph_durable_runs WHERE status = 'blocked') AS blocked_runs,
    (SELECT count(*) FROM langgraph_durable_effects WHERE status = 'unknown'
        OR (status = 'running' AND lease_expires_at < clock_timestamp())) AS unknown_effects,
    (SELECT count(*) FROM langgraph_durable_effects
        WHERE status = 'running' AND lease_expires_at < clock_timestamp()) AS lapsed_effects,
    (SELECT count(*) FROM langgraph_durable_workers
        WHERE heartbeat_at >= clock_timestamp() - make_interval(secs => %(live_seconds)s))
        AS live_workers
-- name: console_thread_checkpoints
-- A thread's root checkpoints, oldest first, for the console's timeline (newest `limit`).
-- The root walked newest first in the primary key (see `where_latest`).
SELECT * FROM (
    SELECT checkpoint_id, parent_checkpoint_id, metadata,
        (checkpoint ->> 'ts')::timestamptz AS created_at
    FROM checkpoints
    WHERE thread_id = %(thread_id)s AND checkpoint_ns >= '' AND checkpoint_ns <= ''
    ORDER BY thread_id DESC, checkpoint_ns DESC, checkpoint_id DESC
    LIMIT %(limit)s
) newest
ORDER BY checkpoint_id

-- name: console_thread_writes
-- What each task wrote after the given root checkpoints (its node is in task_path).
SELECT checkpoint_id, task_id, task_path, idx, channel, type, blob
FROM checkpoint_writes
WHERE thread_id = %(thread_id)s AND checkpoint_ns = ''
    AND checkpoint_id = ANY(%(checkpoint_ids)s)
ORDER BY checkpoint_id, task_path, task_id, idx

-- name: outbox_insert
-- Events from user code, in the caller's transaction (`emit_txn`): they commit or roll back
-- with the caller's own writes (invariant I7). A repeated event id is kept as first stored.
INSERT INTO langgraph_durable_outbox (event_id, event_type, key, payload, thread_id, task_id)
SELECT e.event_id, e.event_type, e.key, e.payload::jsonb, NULL, NULL
FROM (
    SELECT
        unnest(%(e_ids)b::uuid[]) AS event_id,
        unnest(%(e_types)b::text[]) AS event_type,
        unnest(%(e_keys)b::text[]) AS key,
        unnest(%(e_payloads)b::text[]) AS payload
) AS e
ON CONFLICT (event_id) DO NOTHING

-- name: outbox_relay_session
-- The relay holds a round's transaction open while it publishes (its row locks keep each
-- key with one relay), idle as far as the server can tell. Its session gets a finite
-- idle_in_transaction_session_timeout, `limit_ms` (OutboxRelay.idle_limit_ms: a live
-- round is idle for less), so that a relay frozen mid-round (SIGSTOP, a paused VM, a
-- partition) loses its session and its locks, and another relay publishes its keys; it
-- was turned off, and a frozen relay held its keys for hours. A lower limit already in
-- force (set for the server, the database, the role or in the DSN) stays. Returns the
-- limit now in force and the one found, in milliseconds (0: none).
SELECT chosen.limit_ms, chosen.found_ms,
    set_config('idle_in_transaction_session_timeout', chosen.limit_ms::text, false) AS applied
FROM (
    SELECT setting::bigint AS found_ms,
        CASE WHEN setting::bigint > 0 THEN least(setting::bigint, %(limit_ms)s)
            ELSE %(limit_ms)s END AS limit_ms
    FROM pg_settings
    WHERE name = 'idle_in_transaction_session_timeout'
) AS chosen

-- name: outbox_listen
LISTEN langgraph_durable_outbox

-- name: outbox_claim
-- The oldest pending event of up to `keys` keys whose turn has come, locked with SKIP
-- LOCKED so that relays share the work, with the events queued behind it under the same
-- key (up to `limit` rows). Only a key's oldest pending event can be claimed, and its
-- lock is held until the claimer commits, so one key is published by one relay at a time,
-- in `seq` order. `status` is checked again on the locked row: a key whose head another
-- relay has just published is left for the next round.
WITH heads AS (
    SELECT DISTINCT ON (key) seq
    FROM langgraph_durable_outbox
    WHERE status = 'pending'
    ORDER BY key, seq
), claimed AS (
    SELECT o.key
    FROM langgraph_durable_outbox o
    WHERE o.seq IN (SELECT seq FROM heads)
        AND o.status = 'pending' AND o.next_attempt_at <= clock_timestamp()
    ORDER BY o.seq
    LIMIT %(keys)s
    FOR UPDATE OF o SKIP LOCKED
)
SELECT o.seq, o.event_id, o.event_type, o.key, o.payload, o.thread_id, o.task_id,
    o.attempts, o.created_at
FROM langgraph_durable_outbox o
WHERE o.key IN (SELECT key FROM claimed) AND o.status = 'pending'
ORDER BY o.seq
LIMIT %(limit)s
FOR UPDATE OF o

-- name: outbox_mark_published
UPDATE langgraph_durable_outbox SET
    status = 'published', published_at = clock_timestamp(), attempts = attempts + 1,
    last_error = NULL
WHERE seq = ANY(%(seqs)s::bigint[]) AND status = 'pending'

-- name: outbox_mark_failed
-- A publish failed: try again after `delay` seconds, or move the event to 'dead' once it
-- has failed `max_attempts` times. Later events of its key wait while it is pending.
UPDATE langgraph_durable_outbox SET
    attempts = attempts + 1,
    last_error = %(error)s,
    next_attempt_at = clock_timestamp() + make_interval(secs => %(delay)s),
    status = CASE WHEN attempts + 1 >= %(max_attempts)s THEN 'dead' ELSE 'pending' END
WHERE seq = %(seq)s AND status = 'pending'
RETURNING status

-- name: outbox_mark_unreachable
-- A publish failed because the broker could not be reached (`is_transport_error`): the
-- reason is kept for operators, but the event's attempts and next try are left alone, as
-- the failure says nothing about the event; the relay as a whole backs off instead.
UPDATE langgraph_durable_outbox SET last_error = %(error)s
WHERE seq = %(seq)s AND status = 'pending'

-- name: outbox_next_due
-- Seconds until the earliest event waiting out a backoff may be tried again.
SELECT EXTRACT(EPOCH FROM min(next_attempt_at) - clock_timestamp())::float8 AS seconds
FROM langgraph_durable_outbox
WHERE status = 'pending' AND next_attempt_at > clock_timestamp()

-- name: outbox_replay_dead
-- Dead events back to pending (all, or those listed), tried again at once.
UPDATE langgraph_durable_outbox SET
    status = 'pending', attempts = 0, next_attempt_at = '-infinity', last_error = NULL
WHERE status = 'dead' AND (%(event_ids)s::uuid[] IS NULL OR event_id = ANY(%(event_ids)s::uuid[]))
RETURNING event_id

-- name: outbox_events
-- Events for operators, newest first, filtered by status when one is given.
-- `next_attempt_at` is NULL for an event the relay may try at once: one never tried, or
-- replayed, is stored with '-infinity', which psycopg cannot load (`events()` raised
-- DataError "timestamp too small" whenever such an event was listed).
SELECT seq, event_id, event_type, key, payload, thread_id, task_id, status, attempts,
    NULLIF(next_attempt_at, '-infinity') AS next_attempt_at, last_error, created_at,
    published_at
FROM langgraph_durable_outbox
WHERE %(status)s::text IS NULL OR status = %(status)s
ORDER BY seq DESC
LIMIT %(limit)s

-- name: outbox_backlog
-- What is waiting: pending and dead counts and the age of the oldest pending event.
SELECT
    count(*) FILTER (WHERE status = 'pending') AS pending,
    count(*) FILTER (WHERE status = 'dead') AS dead,
    COALESCE(EXTRACT(EPOCH FROM clock_timestamp() - min(created_at)
        FILTER (WHERE status = 'pending')), 0)::float8 AS oldest_pending_seconds
FROM langgraph_durable_outbox
WHERE status <> 'published'

-- name: outbox_prune_published
-- Retention: published events older than the cutoff, a batch at a time.
DELETE FROM langgraph_durable_outbox
WHERE seq IN (
    SELECT seq FROM langgraph_durable_outbox
    WHERE status = 'published' AND published_at < clock_timestamp() - make_interval(secs => %(older_than)s)
    LIMIT %(batch)s
)

-- name: inbox_record
-- A consumer's inbox, in the transaction of its own work: one row when the message is new,
-- none when it was recorded before (a redelivery).
INSERT INTO langgraph_durable_inbox (consumer, message_id)
VALUES (%(consumer)s, %(message_id)s)
ON CONFLICT (consumer, message_id) DO NOTHING
RETURNING message_id

-- name: inbox_prune
DELETE FROM langgraph_durable_inbox
WHERE received_at < clock_timestamp() - make_interval(secs => %(older_than)s)

-- name: grant_allowed
-- Whether this session may grant on the tables: a GRANT by a role that neither owns them
-- nor holds a grant option only warns ("no privileges were granted"); it never fails.
-- No row: the tables are not in that schema.
SELECT pg_has_role(current_user, c.relowner, 'USAGE') AS owner
FROM pg_class c
WHERE c.oid = to_regclass(quote_ident(%(schema)s) || '.checkpoints');

-- name: grant_app_role
-- What an application role needs after the owner ran setup(): read and write the rows of
-- the saver, the effect journal and the run registry, and read the recorded schema
-- versions, and draw outbox event numbers. Nothing else: it owns no table, so it cannot
-- ALTER, DROP or migrate them, and it gets no CREATE on the schema. Advisory locks and
-- LISTEN/NOTIFY need no grant. `tests/unit/test_roles.py` checks that every table of
-- schema.sql is listed here.
GRANT USAGE ON SCHEMA {schema} TO {role};
GRANT SELECT ON TABLE
    {schema}.checkpoint_migrations,
    {schema}.langgraph_durable_migrations
TO {role};
GRANT SELECT, INSERT, UPDATE, DELETE ON TABLE
    {schema}.checkpoints,
    {schema}.checkpoint_blobs,
    {schema}.checkpoint_writes,
    {schema}.langgraph_durable_effects,
    {schema}.langgraph_durable_threads,
    {schema}.langgraph_durable_runs,
    {schema}.langgraph_durable_workers,
    {schema}.langgraph_durable_outbox,
    {schema}.langgraph_durable_inbox
TO {role};
GRANT USAGE ON SEQUENCE {schema}.langgraph_durable_outbox_seq_seq TO {role}

-- name: revoke_app_role
-- Undo grant_app_role (the role keeps any grants made some other way).
REVOKE ALL ON TABLE
    {schema}.checkpoint_migrations,
    {schema}.langgraph_durable_migrations,
    {schema}.checkpoints,
    {schema}.checkpoint_blobs,
    {schema}.checkpoint_writes,
    {schema}.langgraph_durable_effects,
    {schema}.langgraph_durable_threads,
    {schema}.langgraph_durable_runs,
    {schema}.langgraph_durable_workers,
    {schema}.langgraph_durable_outbox,
    {schema}.langgraph_durable_inbox
FROM {role};
REVOKE ALL ON SEQUENCE {schema}.langgraph_durable_outbox_seq_seq FROM {role};
REVOKE USAGE ON SCHEMA {schema} FROM {role}
