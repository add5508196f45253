-- The stored values (a checkpoint's JSON, blobs, task writes) are compressed with lz4
-- instead of Postgres' default pglz. Postgres compresses a row's values once the row passes
-- about 2 kB, inside the statement that writes it; with pglz that cost the server more than
-- the rest of a put (our put statement with a 3 kB checkpoint: 446 us with pglz, 363 with
-- lz4; a 58 kB message list: 4.1 against 2.4 ms), and lz4 also reads back faster. The
-- price is size: about 15% more for a chat's message list. Only values written from now on
-- change; both savers read either. A server built without lz4 keeps pglz, as does
-- PostgreSQL 13, which has no per-column compression. To go back to pglz, per column:
--   ALTER TABLE checkpoint_blobs ALTER COLUMN blob SET COMPRESSION pglz;
DO $$
BEGIN
    IF current_setting('server_version_num')::int >= 140000 THEN
        EXECUTE 'ALTER TABLE checkpoints ALTER COLUMN checkpoint SET COMPRESSION lz4';
        EXECUTE 'ALTER TABLE checkpoint_blobs ALTER COLUMN blob SET COMPRESSION lz4';
        EXECUTE 'ALTER TABLE checkpoint_writes ALTER COLUMN blob SET COMPRESSION lz4';
    END IF;
EXCEPTION WHEN feature_not_supported THEN
    NULL;  -- built without lz4: the values stay pglz
END
$$;
