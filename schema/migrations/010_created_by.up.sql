-- created_by names the API token that created a deployment (its name, never its
-- secret), so that every write can be traced to who made it. Deployments created
-- before tokens had names, or started directly through Temporal, have none.

ALTER TABLE deployments ADD COLUMN created_by text CHECK (created_by <> '');
