-- Upstream's three single-column indexes on thread_id are redundant here: each table has an
-- index that starts with thread_id (checkpoint_blobs' and checkpoint_writes' primary keys,
-- and checkpoints' (thread_id, checkpoint_id) index from durable_002), which serves every
-- query by thread as well. Every row written paid for an entry in them: without them the
-- server's CPU per step of the 10-node benchmark graph fell from 450 to 425 us (5%) and a
-- sync step took 2% less (docs/benchmarks.md). Upstream's saver reads and writes these
-- tables the same without them; its setup() does not build them again (its migrations are
-- recorded as done). To have them back:
--   CREATE INDEX CONCURRENTLY checkpoints_thread_id_idx ON checkpoints (thread_id);
-- (and the same for checkpoint_blobs and checkpoint_writes).
-- DROP INDEX locks each table (ACCESS EXCLUSIVE) until this migration commits; setup()
-- waits for those locks in short tries, so a long transaction does not stall the tables.
DROP INDEX IF EXISTS checkpoints_thread_id_idx, checkpoint_blobs_thread_id_idx,
    checkpoint_writes_thread_id_idx;
