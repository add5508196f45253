-- A run's timeout, kept so that retry() and resume() can give it its whole timeout again:
-- its deadline alone says it only until the first renewal. Runs made before this migration
-- take it from their deadline's distance from their creation (what create() set).
ALTER TABLE langgraph_durable_runs ADD COLUMN IF NOT EXISTS timeout_seconds DOUBLE PRECISION;
UPDATE langgraph_durable_runs
SET timeout_seconds = extract(epoch FROM deadline_at - created_at)
WHERE deadline_at IS NOT NULL AND timeout_seconds IS NULL;
