-- Liveness of Mandible replicas, and what Mandible settles when nobody reports.

-- Every replica heartbeats a row of its own. healthy_since is when it last recovered
-- (started, resumed from a stall, regained its database): a Thorax that heartbeats
-- through a replica is not judged by the time that replica could not serve it. A
-- replica silent past half of dispatch.processing_timeout is gone: another replica
-- ends its dispatcher workflow and sets ended_at.
CREATE TABLE mandible_replicas (
    id            text        PRIMARY KEY CHECK (id <> ''),
    started_at    timestamptz NOT NULL DEFAULT now(),
    last_seen_at  timestamptz NOT NULL DEFAULT now(),
    healthy_since timestamptz NOT NULL DEFAULT now(),
    stopped_at    timestamptz,
    ended_at      timestamptz,
    ended_by      text,
    end_reason    text
);

CREATE INDEX mandible_replicas_running ON mandible_replicas (last_seen_at) WHERE ended_at IS NULL AND stopped_at IS NULL;

-- heartbeat_replica is the replica that recorded the instance's latest heartbeat.
ALTER TABLE thorax_instances ADD COLUMN heartbeat_replica text;

-- A deployment failed outside its workflow (its Thorax died) must be told to its
-- workflow, so that the workflow stops dispatching and cancels what still runs. The
-- notice is written with the failure and deleted once the workflow was told.
CREATE TABLE deployment_workflow_notices (
    deployment_id uuid        PRIMARY KEY REFERENCES deployments (id) ON DELETE CASCADE,
    reason        text        NOT NULL,
    attempts      integer     NOT NULL DEFAULT 0,
    created_at    timestamptz NOT NULL DEFAULT now()
);

-- The overdue sweep scans running commands by claim time.
CREATE INDEX command_queue_running_claimed ON command_queue (claimed_at) WHERE status = 'running';
