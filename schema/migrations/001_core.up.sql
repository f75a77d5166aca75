-- Core tables: Thorax instances, targets, deployments and their steps.

CREATE TABLE thorax_instances (
    -- id is issued by Mandible at registration; it is the assigned_instance_id
    -- carried by listen-mode targets and command messages.
    id                uuid        PRIMARY KEY,
    name              text        NOT NULL CHECK (name <> ''),
    status            text        NOT NULL DEFAULT 'live'
                                  CHECK (status IN ('live', 'draining', 'dead')),
    version           text        NOT NULL DEFAULT '',
    registered_at     timestamptz NOT NULL DEFAULT now(),
    last_heartbeat_at timestamptz NOT NULL DEFAULT now(),
    died_at           timestamptz
);

CREATE INDEX thorax_instances_live_heartbeat
    ON thorax_instances (last_heartbeat_at) WHERE status = 'live';

CREATE TABLE targets (
    id                   uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
    name                 text        NOT NULL UNIQUE
                                     CHECK (name ~ '^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$'),
    mode                 text        NOT NULL CHECK (mode IN ('poll', 'listen')),
    -- address is the listen-mode agent's gRPC endpoint; poll-mode agents have none.
    address              text        CHECK (address IS NULL OR address <> ''),
    labels               jsonb       NOT NULL DEFAULT '{}'::jsonb
                                     CHECK (jsonb_typeof(labels) = 'object'),
    assigned_instance_id uuid        REFERENCES thorax_instances (id) ON DELETE SET NULL,
    created_at           timestamptz NOT NULL DEFAULT now(),
    updated_at           timestamptz NOT NULL DEFAULT now(),
    deregistered_at      timestamptz,
    CONSTRAINT targets_listen_has_address CHECK (mode = 'poll' OR address IS NOT NULL)
);

CREATE INDEX targets_assigned_instance ON targets (assigned_instance_id)
    WHERE deregistered_at IS NULL;
CREATE INDEX targets_labels ON targets USING gin (labels);

CREATE TABLE deployments (
    id              uuid        PRIMARY KEY,
    name            text        NOT NULL CHECK (name <> ''),
    priority        text        NOT NULL CHECK (priority IN ('high', 'normal', 'low')),
    status          text        NOT NULL DEFAULT 'pending'
                                CHECK (status IN ('pending', 'running', 'succeeded', 'failed', 'cancelled')),
    spec            jsonb       NOT NULL,
    -- idempotency_key makes create idempotent: the same key yields the same deployment.
    idempotency_key text        UNIQUE CHECK (idempotency_key <> ''),
    max_parallel    integer     CHECK (max_parallel > 0),
    error           text,
    created_at      timestamptz NOT NULL DEFAULT now(),
    started_at      timestamptz,
    finished_at     timestamptz
);

CREATE INDEX deployments_created ON deployments (created_at DESC, id DESC);
CREATE INDEX deployments_status ON deployments (status, created_at DESC);

CREATE TABLE deployment_steps (
    deployment_id     uuid        NOT NULL REFERENCES deployments (id) ON DELETE CASCADE,
    position          integer     NOT NULL CHECK (position >= 0),
    name              text        NOT NULL CHECK (name <> ''),
    command           text        NOT NULL CHECK (command <> ''),
    timeout           interval    NOT NULL CHECK (timeout > interval '0'),
    continue_on_error boolean     NOT NULL DEFAULT false,
    status            text        NOT NULL DEFAULT 'pending'
                                  CHECK (status IN ('pending', 'running', 'succeeded', 'failed', 'skipped', 'cancelled')),
    started_at        timestamptz,
    finished_at       timestamptz,
    PRIMARY KEY (deployment_id, position),
    UNIQUE (deployment_id, name)
);
