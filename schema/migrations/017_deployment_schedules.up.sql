-- Deployment schedules (schema/schedules.go). Temporal holds each schedule and
-- starts its runs; this table is the catalogue the API lists: the name, how it
-- repeats as the user wrote it (Temporal keeps a cron expression only compiled), the
-- spec and who made it.
CREATE TABLE deployment_schedules (
    name       text        PRIMARY KEY CHECK (name ~ '^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$'),
    cron       text        CHECK (cron <> ''),
    every      interval    CHECK (every > interval '0'),
    spec       jsonb       NOT NULL,
    created_by text        NOT NULL DEFAULT '',
    created_at timestamptz NOT NULL DEFAULT now(),
    CHECK ((cron IS NULL) <> (every IS NULL))
);
