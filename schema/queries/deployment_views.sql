-- Deployments as the API shows them (schema/deployment_views.go).

-- name: DeploymentByID :one
SELECT id, name, priority, status, idempotency_key, created_by, error, created_at, started_at, finished_at, spec
FROM deployments
WHERE id = @id;

-- name: StepsOfDeployment :many
SELECT position, name, command, status, continue_on_error, started_at, finished_at
FROM deployment_steps
WHERE deployment_id = @deployment_id
ORDER BY position;

-- name: TargetResultsOfDeployment :many
-- TargetResultsOfDeployment reads each target of each step with its latest command,
-- the last tail_bytes bytes of its output and its analysis. A request a retry
-- superseded gives way to its retry.
SELECT p.step_position, t.name AS target, p.status AS request_status, c.status AS command_status, c.exit_code,
       substring(c.output_raw, greatest(octet_length(c.output_raw) - sqlc.arg(tail_bytes)::int + 1, 1))::bytea AS output_tail,
       (coalesce(c.output_truncated, false) OR coalesce(octet_length(c.output_raw), 0) > sqlc.arg(tail_bytes)::int)::bool AS truncated,
       coalesce(c.error, CASE WHEN p.status IN ('failed', 'expired', 'cancelled') THEN p.last_error END, '')::text AS error,
       p.attempts, c.started_at, c.finished_at,
       a.status AS analysis_status, a.category, a.summary, a.suggestion
FROM pending_dispatch_requests p
JOIN targets t ON t.id = p.target_id
LEFT JOIN command_queue c ON c.dispatch_request_id = p.id AND c.dispatch_attempt = p.attempts
LEFT JOIN analyses a ON a.command_id = c.id
WHERE p.deployment_id = @deployment_id::uuid AND NOT p.superseded
ORDER BY p.step_position, t.name;

-- name: ListDeployments :many
-- ListDeployments lists deployments newest first, filtered by status (none: all),
-- name (empty: all) and position (those created before the deployment before).
SELECT id, name, priority, status, idempotency_key, created_by, error, created_at, started_at, finished_at
FROM deployments
WHERE (coalesce(cardinality(@statuses::text[]), 0) = 0 OR status = ANY(@statuses::text[]))
  AND (@name::text = '' OR name = @name::text)
  AND (sqlc.narg(before)::uuid IS NULL
       OR (created_at, id) < (SELECT b.created_at, b.id FROM deployments b WHERE b.id = sqlc.narg(before)::uuid))
ORDER BY created_at DESC, id DESC
LIMIT @max_rows;
