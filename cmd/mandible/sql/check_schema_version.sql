-- The schema version check-config --connect reports: the newest migration applied,
-- from the migration runner's own table (absent before the first migration).
SELECT coalesce(max(version), 0) FROM schema_migrations;
