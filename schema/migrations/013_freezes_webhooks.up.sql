-- Freeze windows, webhooks and their deliveries (schema/freezes.go, schema/webhooks.go).

-- A freeze refuses deployments whose targets match its selector while it is active.
-- It is active between starts_at and ends_at (either may be open), and, when weekly
-- is set, only inside the weekly window ({"days":["sat"],"from":"18:00","to":"08:00",
-- "timezone":"Europe/Paris"}), which package freeze evaluates: time zones and
-- windows that wrap past midnight are easier to get right in Go than in SQL.
CREATE TABLE freezes (
    name       text        PRIMARY KEY CHECK (name ~ '^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$'),
    -- selector matches a target whose labels hold every key=value; {} matches all.
    selector   jsonb       NOT NULL DEFAULT '{}'::jsonb CHECK (jsonb_typeof(selector) = 'object'),
    reason     text        NOT NULL CHECK (reason <> ''),
    starts_at  timestamptz,
    ends_at    timestamptz,
    weekly     jsonb       CHECK (weekly IS NULL OR jsonb_typeof(weekly) = 'object'),
    created_by text        NOT NULL DEFAULT '',
    created_at timestamptz NOT NULL DEFAULT now(),
    CHECK (starts_at IS NULL OR ends_at IS NULL OR starts_at < ends_at)
);

-- A deployment created through a freeze records who overrode which freezes.
ALTER TABLE deployments
    ADD COLUMN freeze_override_by text,
    ADD COLUMN freeze_overrides   text[];

CREATE TABLE webhooks (
    id          uuid        PRIMARY KEY,
    url         text        NOT NULL CHECK (url ~ '^https?://'),
    -- event_types are exact types or prefixes ending in ".*" ("step.*").
    event_types text[]      NOT NULL CHECK (cardinality(event_types) > 0),
    -- secret keys the HMAC-SHA256 signature of every delivery; the receiver holds it too.
    secret      text        NOT NULL CHECK (secret <> ''),
    created_by  text        NOT NULL DEFAULT '',
    created_at  timestamptz NOT NULL DEFAULT now()
);

-- One row per event a webhook wants. The pair is unique, so that fanning the same
-- events out twice (a replica that died after inserting, before moving the cursor)
-- delivers once.
CREATE TABLE webhook_deliveries (
    id              bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    webhook_id      uuid        NOT NULL REFERENCES webhooks (id) ON DELETE CASCADE,
    event_id        bigint      NOT NULL REFERENCES deployment_events (id) ON DELETE CASCADE,
    status          text        NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'delivered', 'failed')),
    -- attempts counts the sends started; it is also the fencing token of a claim:
    -- a sender records its outcome only while attempts is still what it claimed.
    attempts        integer     NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    -- next_attempt_at is when the row may be claimed: after a backoff, or after the
    -- lease of a claim whose sender died.
    next_attempt_at timestamptz NOT NULL DEFAULT now(),
    last_error      text,
    last_status     integer,
    created_at      timestamptz NOT NULL DEFAULT now(),
    ended_at        timestamptz,
    UNIQUE (webhook_id, event_id)
);

CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at) WHERE status = 'pending';
CREATE INDEX webhook_deliveries_failed ON webhook_deliveries (webhook_id, id) WHERE status = 'failed';

-- The fan-out's place in the event log: every event with id <= last_event_id has its
-- deliveries. One row; the replica that locks it fans out, the others skip.
CREATE TABLE webhook_cursor (
    id            boolean PRIMARY KEY DEFAULT true CHECK (id),
    last_event_id bigint  NOT NULL DEFAULT 0
);
INSERT INTO webhook_cursor (last_event_id) SELECT coalesce(max(id), 0) FROM deployment_events;
