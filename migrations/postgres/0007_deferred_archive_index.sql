-- The archive index is filled in bulk, not inside every intake transaction (mirrors
-- migrations/sqlite/0007_deferred_archive_index.sql). SQLite needs a catch-up table for that;
-- GIN has it built in: with `fastupdate` new entries go to the index's pending list (a cheap
-- append) and are merged into the main index in bulk by VACUUM/autovacuum, or when the list
-- passes `gin_pending_list_limit` (in kB). Searches read the pending list too, so a new message
-- is found at once, as with SQLite's catch-up before each search.
ALTER INDEX messages_fts SET (fastupdate = on, gin_pending_list_limit = 4096);
