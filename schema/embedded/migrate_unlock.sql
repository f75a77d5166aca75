-- Releases the migration lock ($1: its key).
SELECT pg_advisory_unlock($1::bigint);
