-- The dispatch queue (seed "Competing Consumers") and the command queue Thorax claims from
-- (seed "Queue Topology": every command is a row in command_queue).

CREATE TABLE pending_dispatch_requests (
    id              uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
    -- idempotency_key makes enqueue idempotent: a retried enqueue finds the existing row.
    idempotency_key text        NOT NULL UNIQUE CHECK (idempotency_key <> ''),
    target_id       uuid        NOT NULL REFERENCES targets (id),
    deployment_id   uuid        REFERENCES deployments (id) ON DELETE CASCADE,
    step_position   integer,
    command         text        NOT NULL CHECK (command <> ''),
    timeout         interval    NOT NULL DEFAULT interval '10 minutes' CHECK (timeout > interval '0'),
    -- env and working_dir are handed to the agent with the command.
    env             jsonb       NOT NULL DEFAULT '{}'::jsonb CHECK (jsonb_typeof(env) = 'object'),
    working_dir     text        CHECK (working_dir <> ''),
    priority        text        NOT NULL CHECK (priority IN ('high', 'normal', 'low')),
    -- priority_rank orders the claim: high (0) before normal (1) before low (2).
    priority_rank   smallint    GENERATED ALWAYS AS (
                                    CASE priority WHEN 'high' THEN 0 WHEN 'normal' THEN 1 ELSE 2 END
                                ) STORED,
    status          text        NOT NULL DEFAULT 'pending'
                                CHECK (status IN ('pending', 'processing', 'dispatched', 'failed', 'expired')),
    -- attempts counts failed deliveries; the budget is 10.
    attempts        integer     NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    created_at      timestamptz NOT NULL DEFAULT now(),
    -- expires_at is created_at + 24 h: after it the request is never dispatched.
    expires_at      timestamptz NOT NULL,
    next_attempt_at timestamptz NOT NULL DEFAULT now(),
    claimed_by      text,
    claimed_at      timestamptz,
    -- claim_epoch is the fencing token: every claim and every reclaim moves it on, and
    -- every outcome write names the epoch it holds.
    claim_epoch     bigint      NOT NULL DEFAULT 0,
    dispatched_at   timestamptz,
    finished_at     timestamptz,
    last_error      text,
    CONSTRAINT pending_dispatch_requests_expiry CHECK (expires_at > created_at),
    CONSTRAINT pending_dispatch_requests_step CHECK ((deployment_id IS NULL) = (step_position IS NULL)),
    CONSTRAINT pending_dispatch_requests_claim CHECK (
        status <> 'processing' OR (claimed_by IS NOT NULL AND claimed_at IS NOT NULL))
);

-- The claim reads pending rows by priority, then age.
CREATE INDEX pending_dispatch_requests_claimable
    ON pending_dispatch_requests (priority_rank, created_at)
    WHERE status = 'pending';
-- Orphan reclaim scans rows held in processing by claim age.
CREATE INDEX pending_dispatch_requests_processing
    ON pending_dispatch_requests (claimed_at)
    WHERE status = 'processing';
-- The expiry sweep scans live rows by expiry.
CREATE INDEX pending_dispatch_requests_live_expiry
    ON pending_dispatch_requests (expires_at)
    WHERE status IN ('pending', 'processing');
CREATE INDEX pending_dispatch_requests_deployment
    ON pending_dispatch_requests (deployment_id, step_position)
    WHERE deployment_id IS NOT NULL;

-- dispatch_backoff is the delay before the next attempt after `attempts` failed
-- deliveries: 2 s doubling per attempt, capped at 5 minutes, with equal jitter (between
-- half and all of it). The one definition every retry path uses.
CREATE FUNCTION dispatch_backoff(attempts integer) RETURNS interval
    LANGUAGE sql VOLATILE AS $$
    SELECT least(make_interval(secs => 2 * power(2, greatest(attempts - 1, 0))), interval '5 minutes')
           * (0.5 + random() / 2)
$$;

-- New requests wake every replica's LISTEN connection; one notification per statement,
-- so a batch insert costs one wake-up.
CREATE FUNCTION notify_dispatch_requests() RETURNS trigger
    LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('mantis_dispatch_requests', '');
    RETURN NULL;
END;
$$;

CREATE TRIGGER pending_dispatch_requests_notify
    AFTER INSERT ON pending_dispatch_requests
    FOR EACH STATEMENT EXECUTE FUNCTION notify_dispatch_requests();

CREATE TABLE command_queue (
    id                   uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
    dispatch_request_id  uuid        NOT NULL REFERENCES pending_dispatch_requests (id) ON DELETE CASCADE,
    -- dispatch_attempt ties the command to one delivery of its request: a redelivery after a
    -- failure writes a new row, and a retried delivery activity finds its own row.
    dispatch_attempt     integer     NOT NULL CHECK (dispatch_attempt >= 0),
    target_id            uuid        NOT NULL REFERENCES targets (id),
    deployment_id        uuid        REFERENCES deployments (id) ON DELETE CASCADE,
    step_position        integer,
    command              text        NOT NULL CHECK (command <> ''),
    timeout              interval    NOT NULL CHECK (timeout > interval '0'),
    env                  jsonb       NOT NULL DEFAULT '{}'::jsonb,
    working_dir          text,
    priority             text        NOT NULL CHECK (priority IN ('high', 'normal', 'low')),
    priority_rank        smallint    GENERATED ALWAYS AS (
                                         CASE priority WHEN 'high' THEN 0 WHEN 'normal' THEN 1 ELSE 2 END
                                     ) STORED,
    mode                 text        NOT NULL CHECK (mode IN ('poll', 'listen')),
    assigned_instance_id uuid,
    max_retries          integer     NOT NULL DEFAULT 1 CHECK (max_retries >= 0),
    status               text        NOT NULL DEFAULT 'queued'
                                     CHECK (status IN ('queued', 'running', 'succeeded', 'failed', 'cancelled', 'lost')),
    -- holder_instance_id and lease_epoch fence Thorax: a result from an instance that no
    -- longer holds the command is refused.
    holder_instance_id   uuid,
    lease_epoch          bigint      NOT NULL DEFAULT 0,
    claimed_at           timestamptz,
    started_at           timestamptz,
    finished_at          timestamptz,
    exit_code            integer,
    output               text,
    output_truncated     boolean     NOT NULL DEFAULT false,
    error                text,
    created_at           timestamptz NOT NULL DEFAULT now(),
    UNIQUE (dispatch_request_id, dispatch_attempt)
);

-- FetchPendingCommands reads queued commands of a target by priority, then age.
CREATE INDEX command_queue_claimable
    ON command_queue (target_id, priority_rank, created_at)
    WHERE status = 'queued';
CREATE INDEX command_queue_holder
    ON command_queue (holder_instance_id)
    WHERE status = 'running';
CREATE INDEX command_queue_deployment
    ON command_queue (deployment_id, step_position)
    WHERE deployment_id IS NOT NULL;
