-- A step's window over a deployment's targets (schema/deployment_window.go).

-- name: RecordDeploymentTargets :exec
-- RecordDeploymentTargets records a deployment's targets in order, unless it has some.
INSERT INTO deployment_targets (deployment_id, ordinal, target_id)
SELECT @deployment_id::uuid, n.ord - 1, t.id
FROM unnest(@targets::text[]) WITH ORDINALITY AS n(name, ord)
JOIN targets t ON t.name = n.name
WHERE NOT EXISTS (SELECT 1 FROM deployment_targets d WHERE d.deployment_id = @deployment_id::uuid);

-- name: DeploymentTargetCount :one
SELECT count(*) FROM deployment_targets WHERE deployment_id = @deployment_id;

-- name: LockStep :one
-- LockStep reads a step and what its commands need, holding the step's row. The
-- step's env_secret joins its env as stored: sealed until a Thorax fetches the command.
SELECT s.status, s.continue_on_error, s.command, s.timeout, s.retry_round, d.priority, d.max_parallel,
       (coalesce(x.step->'env', '{}'::jsonb) || coalesce(x.step->'env_secret', '{}'::jsonb))::jsonb AS env,
       coalesce(x.step->>'working_dir', '')::text AS working_dir
FROM deployment_steps s JOIN deployments d ON d.id = s.deployment_id
-- The recorded steps are the spec's steps, then its rollback steps (on_failure), then
-- verify steps, which have no spec entry of their own.
CROSS JOIN LATERAL (SELECT (coalesce(d.spec->'steps', '[]'::jsonb) || coalesce(d.spec->'on_failure', '[]'::jsonb))
                           ->(@position::int) AS step) x
WHERE s.deployment_id = @deployment_id AND s.position = @position::int
FOR UPDATE OF s;

-- name: StepCounts :one
-- StepCounts counts a step's targets: all of them, those enqueued, those ended (the
-- request failed, expired or was cancelled, or the latest command ended) and those
-- that succeeded. A request a retry superseded does not count: its retry does.
WITH s AS (
    SELECT p.status IN ('failed', 'expired', 'cancelled')
           OR (p.status = 'dispatched' AND c.status IN ('succeeded', 'failed', 'cancelled', 'lost')) AS ended,
           p.status = 'dispatched' AND c.status IS NOT DISTINCT FROM 'succeeded' AS ok
    FROM pending_dispatch_requests p
    LEFT JOIN command_queue c ON c.dispatch_request_id = p.id AND c.dispatch_attempt = p.attempts
    WHERE p.deployment_id = @deployment_id::uuid AND p.step_position = @position::int AND NOT p.superseded
)
SELECT (SELECT count(*) FROM deployment_targets dt WHERE dt.deployment_id = @deployment_id)::bigint AS total,
       count(*) AS enqueued, count(*) FILTER (WHERE ended) AS ended, count(*) FILTER (WHERE ended AND ok) AS succeeded
FROM s;

-- name: NextTargetsOfStep :many
-- NextTargetsOfStep names the next n targets, in deployment order, the step has not
-- been enqueued for, or whose request a retry superseded.
SELECT t.name
FROM deployment_targets dt JOIN targets t ON t.id = dt.target_id
WHERE dt.deployment_id = @deployment_id
  AND NOT EXISTS (SELECT 1 FROM pending_dispatch_requests p
                  WHERE p.deployment_id = @deployment_id::uuid AND p.step_position = @position::int AND p.target_id = dt.target_id
                    AND NOT p.superseded)
ORDER BY dt.ordinal
LIMIT @n;

-- name: FailedTargetsOfStep :many
-- FailedTargetsOfStep names up to max_rows targets the step failed on, by name.
SELECT t.name AS target, c.exit_code, coalesce(c.error, p.last_error, '')::text AS error
FROM pending_dispatch_requests p
JOIN targets t ON t.id = p.target_id
LEFT JOIN command_queue c ON c.dispatch_request_id = p.id AND c.dispatch_attempt = p.attempts
WHERE p.deployment_id = @deployment_id::uuid AND p.step_position = @position::int AND NOT p.superseded
  AND (p.status IN ('failed', 'expired', 'cancelled')
       OR (p.status = 'dispatched' AND c.status IN ('failed', 'cancelled', 'lost')))
ORDER BY t.name
LIMIT @max_rows;

-- name: PendingStepsFrom :many
-- PendingStepsFrom lists the positions of the steps from position on not yet started.
SELECT position FROM deployment_steps
WHERE deployment_id = @deployment_id AND position >= @position AND status = 'pending'
ORDER BY position;

-- name: TouchedTargetCount :one
-- TouchedTargetCount counts the targets, a prefix in deployment order, that the steps
-- at positions below steps reached: one past the last ordinal any of them enqueued.
SELECT coalesce(max(dt.ordinal) + 1, 0)::int
FROM deployment_targets dt
WHERE dt.deployment_id = @deployment_id
  AND EXISTS (SELECT 1 FROM pending_dispatch_requests p
              WHERE p.deployment_id = @deployment_id::uuid AND p.target_id = dt.target_id AND p.step_position < @steps::int);
