-- A no-op kept so that version numbers match langgraph-checkpoint-postgres.
SELECT 1;
