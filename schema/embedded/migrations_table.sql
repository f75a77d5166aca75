-- The record of applied migrations. The migration runner creates it rather than a
-- migration, since it says which migrations have run; sqlc does not see it.
CREATE TABLE IF NOT EXISTS schema_migrations (
    version    integer     PRIMARY KEY,
    name       text        NOT NULL,
    checksum   text        NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
);
