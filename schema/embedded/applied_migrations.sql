-- The migrations applied to this database, by version, with their checksums.
SELECT version, checksum FROM schema_migrations ORDER BY version;
