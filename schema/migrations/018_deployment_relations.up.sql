-- A deployment made from another one (schema/resume.go): resumed from a step of a
-- deployment that failed or was cancelled, or run again from the same spec. The
-- link is set once, when the new deployment is created, before its workflow starts.
ALTER TABLE deployments
    ADD COLUMN previous_deployment_id uuid REFERENCES deployments (id),
    ADD COLUMN relation text CHECK (relation IN ('resume', 'rerun')),
    -- from_step is the 0-based position, in the previous deployment's steps, of the
    -- first step a resume runs (its step 0).
    ADD COLUMN from_step integer CHECK (from_step >= 0),
    ADD CONSTRAINT deployments_relation_link CHECK ((previous_deployment_id IS NULL) = (relation IS NULL)),
    ADD CONSTRAINT deployments_from_step_resume CHECK (from_step IS NULL OR relation = 'resume');

CREATE INDEX deployments_previous ON deployments (previous_deployment_id) WHERE previous_deployment_id IS NOT NULL;
