-- Deployments: their creation, start and end, and the steps' start and end
-- (schema/deployments.go).

-- name: InsertDeployment :one
-- InsertDeployment records a pending deployment; no row when its id or idempotency key
-- already names one.
INSERT INTO deployments (id, name, priority, spec, idempotency_key, max_parallel, created_by)
VALUES (@id, @name, @priority, @spec, sqlc.narg(idempotency_key), sqlc.narg(max_parallel), nullif(@created_by::text, ''))
ON CONFLICT DO NOTHING
RETURNING id;

-- name: ExistingDeployment :one
-- ExistingDeployment is the deployment an insert conflicted with: the one of that id
-- first, else the one of that idempotency key.
SELECT id FROM deployments
WHERE id = @id OR (sqlc.narg(idempotency_key)::text IS NOT NULL AND idempotency_key = sqlc.narg(idempotency_key)::text)
ORDER BY id = @id DESC
LIMIT 1;

-- name: TargetsNamedOrSelected :many
-- TargetsNamedOrSelected names the registered targets among names and those whose
-- labels hold every key and value of selector (none when it is empty).
SELECT name FROM targets
WHERE deregistered_at IS NULL
  AND (name = ANY(@names::text[]) OR (@selector::jsonb <> '{}'::jsonb AND labels @> @selector::jsonb))
ORDER BY name;

-- name: InsertStep :exec
-- InsertStep records one step of a deployment, once.
INSERT INTO deployment_steps (deployment_id, position, name, command, timeout, continue_on_error)
VALUES (@deployment_id, @position, @name, @command, make_interval(secs => @timeout_seconds::float8), @continue_on_error)
ON CONFLICT DO NOTHING;

-- name: MarkDeploymentRunning :one
-- MarkDeploymentRunning starts a pending deployment; no row when it is not pending.
UPDATE deployments SET status = 'running', started_at = now()
WHERE id = @id AND status = 'pending'
RETURNING created_by;

-- name: MarkStepRunning :one
-- MarkStepRunning starts a pending step; no row when it is not pending.
UPDATE deployment_steps SET status = 'running', started_at = now()
WHERE deployment_id = @deployment_id AND position = @position AND status = 'pending'
RETURNING name;

-- name: MarkStepEnded :one
-- MarkStepEnded ends a step that has not ended; no row when it has.
UPDATE deployment_steps SET status = @status, finished_at = now()
WHERE deployment_id = @deployment_id AND position = @position AND status IN ('pending', 'running')
RETURNING name;

-- name: MarkDeploymentEnded :one
-- MarkDeploymentEnded ends a deployment that has not ended; no row when it has.
UPDATE deployments SET status = @status, finished_at = now(), error = sqlc.narg(error)
WHERE id = @id AND status IN ('pending', 'running')
RETURNING status;

-- name: DeploymentStatus :one
SELECT status FROM deployments WHERE id = @id;

-- name: CancelUndispatchedRequests :exec
-- CancelUndispatchedRequests ends a cancelled deployment's requests not yet dispatched.
UPDATE pending_dispatch_requests
SET status = 'cancelled', finished_at = now(), claimed_by = NULL, last_error = 'deployment cancelled'
WHERE deployment_id = @deployment_id::uuid AND status IN ('pending', 'processing');

-- name: CancelUnfinishedCommands :execrows
-- CancelUnfinishedCommands cancels a cancelled deployment's queued and running
-- commands; Thorax learns of running ones on its next heartbeat and kills them.
UPDATE command_queue SET status = 'cancelled', finished_at = now(), error = 'deployment cancelled'
WHERE deployment_id = @deployment_id::uuid AND status IN ('queued', 'running');

-- name: CancelDispatchedRequests :exec
-- CancelDispatchedRequests ends the dispatched requests whose latest command was
-- cancelled.
UPDATE pending_dispatch_requests p
SET status = 'cancelled', finished_at = now(), last_error = 'deployment cancelled'
FROM command_queue c
WHERE p.deployment_id = @deployment_id::uuid AND p.status = 'dispatched' AND c.dispatch_request_id = p.id
  AND c.dispatch_attempt = p.attempts AND c.status = 'cancelled';
