-- Human decisions in a deployment: approvals, the answer to a failed step that asks
-- (retry, skip, abort), and pause/resume. The Deployment workflow takes each decision
-- as a Temporal Update and records it here through an activity, so the history, the
-- event log and this table say the same: who decided what, when, at which step.

CREATE TABLE deployment_decisions (
    id            bigserial   PRIMARY KEY,
    deployment_id uuid        NOT NULL REFERENCES deployments (id) ON DELETE CASCADE,
    decision      text        NOT NULL
                              CHECK (decision IN ('approve', 'reject', 'retry', 'skip', 'abort', 'pause', 'resume')),
    -- decided_by is the API token's name that decided, or "(timeout)" when an approval
    -- step's timeout decided.
    decided_by    text        NOT NULL CHECK (decided_by <> ''),
    step_position integer     CHECK (step_position >= 0),
    comment       text        NOT NULL DEFAULT '',
    decided_at    timestamptz NOT NULL,
    -- update_id is the Temporal Update's id (or the timer's decision key): a retried
    -- activity records the decision once.
    update_id     text        NOT NULL UNIQUE CHECK (update_id <> '')
);

CREATE INDEX deployment_decisions_deployment ON deployment_decisions (deployment_id, id);

-- waiting is what the deployment waits for a person to decide, as the API shows it
-- ({"kind","step","approvers","since"}), or NULL when it waits for nobody.
ALTER TABLE deployments ADD COLUMN waiting jsonb CHECK (waiting IS NULL OR jsonb_typeof(waiting) = 'object');

-- retry_round counts the retries of a step a person asked for; a retried target's
-- dispatch request carries the round in its idempotency key, as a new request.
ALTER TABLE deployment_steps ADD COLUMN retry_round integer NOT NULL DEFAULT 0 CHECK (retry_round >= 0);

-- superseded marks a failed request that a retry replaced: the step counts the new
-- request for that target, and the old one stays as the record of the failure.
ALTER TABLE pending_dispatch_requests ADD COLUMN superseded boolean NOT NULL DEFAULT false;
