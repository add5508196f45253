-- The stored values (a checkpoint's JSON, blobs, task writes) are compressed with lz4
-- instead of Postgres' default pglz. Postgres compresses a row's values once the row passes
-- about 2 kB, inside the statement that writes it; with pglz that cost the server more than
-- the rest of a put (our put statement with a 3 kB checkpoint: 446 us with pglz, 363 with
-- lz4; a 58 kB message list: 4.1 against 2.4 ms). The price: 13-16% more space for a
-- chat's message list, and a value pglz leaves uncompressed (it gives up under 25% saved)
-- is stored compressed, so reading it back decompresses (50 MB: 5% slower). Only values
-- written from now on change; both savers read either. A server without lz4 (PostgreSQL
-- 13, or built without it, like the embedded one) keeps pglz, with a notice; after moving
-- to one with lz4, run the three statements below by hand. To go back to pglz, per column:
--   ALTER TABLE checkpoint_blobs ALTER COLUMN blob SET COMPRESSION pglz;
-- The ALTERs lock the tables (ACCESS EXCLUSIVE) until this migration commits; setup()
-- waits for those locks in short tries, so a long transaction does not stall the tables.
DO $$
BEGIN
    IF EXISTS (
        SELECT 1 FROM pg_settings
        WHERE name = 'default_toast_compression' AND 'lz4' = ANY(enumvals)
    ) THEN
        EXECUTE 'ALTER TABLE checkpoints ALTER COLUMN checkpoint SET COMPRESSION lz4';
        EXECUTE 'ALTER TABLE checkpoint_blobs ALTER COLUMN blob SET COMPRESSION lz4';
        EXECUTE 'ALTER TABLE checkpoint_writes ALTER COLUMN blob SET COMPRESSION lz4';
    ELSE
        RAISE NOTICE 'this server has no lz4 compression: checkpoint values stay pglz';
    END IF;
END
$$;
