-- The virtual transaction ids of the transactions that hold a write lock on
-- deployment_events (schema.EventLogWriters). pg_locks is a system view sqlc does not
-- know, so this query is embedded rather than generated.
SELECT DISTINCT virtualtransaction FROM pg_locks
WHERE locktype = 'relation'
  AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
  AND relation = 'deployment_events'::regclass
  AND mode = 'RowExclusiveLock';
