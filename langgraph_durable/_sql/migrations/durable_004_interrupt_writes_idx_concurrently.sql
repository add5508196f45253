-- pending_approvals() finds waiting threads without scanning every write.
CREATE INDEX CONCURRENTLY IF NOT EXISTS lgd_checkpoint_writes_interrupts_idx
    ON checkpoint_writes (thread_id, checkpoint_id)
    WHERE channel = '__interrupt__' AND checkpoint_ns = '';
