-- A deployment's resolved targets, in deployment order. The Deployment workflow keeps
-- each step's window here, on the database side: the activity that waits for results
-- also enqueues the next targets, so a list of up to 10,000 names never travels through
-- Temporal's history (2 MB per payload, 50 MB per run).

CREATE TABLE deployment_targets (
    deployment_id uuid    NOT NULL REFERENCES deployments (id) ON DELETE CASCADE,
    -- ordinal is the target's place in the deployment (names sorted), the order in
    -- which each step enqueues them.
    ordinal       integer NOT NULL CHECK (ordinal >= 0),
    target_id     uuid    NOT NULL REFERENCES targets (id),
    PRIMARY KEY (deployment_id, ordinal),
    UNIQUE (deployment_id, target_id)
);
