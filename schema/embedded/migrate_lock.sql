-- Takes the session advisory lock every migrating process takes ($1: its key), so
-- replicas started together apply each migration once.
SELECT pg_advisory_lock($1::bigint);
