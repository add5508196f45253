-- delete_for_runs finds a run's checkpoints without scanning the table.
CREATE INDEX CONCURRENTLY IF NOT EXISTS lgd_checkpoints_run_id_idx
    ON checkpoints ((metadata ->> 'run_id'));
