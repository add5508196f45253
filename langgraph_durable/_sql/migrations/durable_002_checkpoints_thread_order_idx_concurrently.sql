-- list() across all namespaces of one thread reads newest-first without sorting the thread.
CREATE INDEX CONCURRENTLY IF NOT EXISTS lgd_checkpoints_thread_id_checkpoint_id_idx
    ON checkpoints (thread_id, checkpoint_id);
