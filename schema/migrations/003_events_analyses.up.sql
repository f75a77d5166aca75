-- The durable deployment event log (its ids are the SSE event ids) and log analyses.

CREATE TABLE deployment_events (
    id            bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    deployment_id uuid        REFERENCES deployments (id) ON DELETE CASCADE,
    type          text        NOT NULL CHECK (type ~ '^(deployment|step|target)\.[a-z_]+$'),
    data          jsonb       NOT NULL DEFAULT '{}'::jsonb,
    created_at    timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX deployment_events_deployment ON deployment_events (deployment_id, id);

CREATE TABLE analyses (
    id          uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
    -- command_id is set for analyses Mantis queues itself; external requests arriving on
    -- mantis.analysis.requests carry their own correlation id instead.
    command_id  uuid        UNIQUE REFERENCES command_queue (id) ON DELETE CASCADE,
    external_id text        UNIQUE CHECK (external_id <> ''),
    source      text        NOT NULL CHECK (source IN ('internal', 'external')),
    status      text        NOT NULL DEFAULT 'queued' CHECK (status IN ('queued', 'done', 'failed')),
    input       text        NOT NULL DEFAULT '',
    category    text,
    summary     text,
    suggestion  text,
    refined_by  text,
    error       text,
    created_at  timestamptz NOT NULL DEFAULT now(),
    finished_at timestamptz,
    CONSTRAINT analyses_subject CHECK ((command_id IS NULL) <> (external_id IS NULL))
);

CREATE INDEX analyses_queued ON analyses (created_at) WHERE status = 'queued';
