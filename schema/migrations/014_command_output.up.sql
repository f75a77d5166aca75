-- Live output of running commands: agents stream chunks through Thorax while the
-- command runs (best effort, bounded), apart from the result's own output tail, which
-- still arrives with the result. Each stored chunk is also a target.output event.

CREATE TABLE command_output (
    id                  bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    command_id          uuid        NOT NULL REFERENCES command_queue (id) ON DELETE CASCADE,
    -- seq numbers a command's chunks as the agent cut them; a chunk sent again (a
    -- retried call) keeps its seq, so the unique key stores it once.
    seq                 bigint      NOT NULL CHECK (seq >= 0),
    dispatch_request_id uuid        NOT NULL,
    deployment_id       uuid        REFERENCES deployments (id) ON DELETE CASCADE,
    step_position       integer,
    target              text        NOT NULL,
    -- data is bytes, whatever the command printed: NUL and invalid UTF-8 included.
    data                bytea       NOT NULL,
    -- truncated marks the one chunk that says the command's bound was reached: no
    -- chunk of the command is stored after it.
    truncated           boolean     NOT NULL DEFAULT false,
    created_at          timestamptz NOT NULL DEFAULT now(),
    UNIQUE (command_id, seq)
);

CREATE INDEX command_output_deployment ON command_output (deployment_id, target, step_position, id);
CREATE INDEX command_output_created ON command_output (created_at);

-- The bytes stored per command, against output.max_bytes_per_command. Its row is
-- locked by every store of the command's chunks, so concurrent stores count right.
CREATE TABLE command_output_totals (
    command_id uuid        PRIMARY KEY REFERENCES command_queue (id) ON DELETE CASCADE,
    bytes      bigint      NOT NULL DEFAULT 0,
    truncated  boolean     NOT NULL DEFAULT false,
    updated_at timestamptz NOT NULL DEFAULT now()
);

-- Retention prunes the event log from its start: pruned_through is the highest event id
-- deleted so far. A stream resuming after an id below it has missed events for good,
-- and is told so (an SSE reset event) rather than left with a silent gap.
CREATE TABLE event_log_retention (
    singleton      boolean     PRIMARY KEY DEFAULT true CHECK (singleton),
    pruned_through bigint      NOT NULL DEFAULT 0,
    pruned_at      timestamptz NOT NULL DEFAULT now()
);
INSERT INTO event_log_retention DEFAULT VALUES;

CREATE INDEX deployment_events_created ON deployment_events (created_at);
