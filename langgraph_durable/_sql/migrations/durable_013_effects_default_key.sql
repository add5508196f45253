-- Whether an effect's key was derived from its thread (`@effect` without `key=`). Deleting
-- a thread deletes only those rows of it: a business key (`key=`) may be shared by other
-- threads, which rely on its row to replay rather than act again (I2). Rows claimed before
-- this migration count as business-keyed, and stay.
ALTER TABLE langgraph_durable_effects
    ADD COLUMN IF NOT EXISTS default_key BOOLEAN NOT NULL DEFAULT false;
