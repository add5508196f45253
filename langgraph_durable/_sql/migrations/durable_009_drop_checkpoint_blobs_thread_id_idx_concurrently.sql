-- Redundant with the primary key, which starts with thread_id: see durable_008.
DROP INDEX CONCURRENTLY IF EXISTS checkpoint_blobs_thread_id_idx
