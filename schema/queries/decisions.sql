-- Human decisions in a deployment (schema/decisions.go).

-- name: InsertDecision :one
-- InsertDecision records a decision once per update id, and returns the stored row.
WITH ins AS (
    INSERT INTO deployment_decisions (deployment_id, decision, decided_by, step_position, comment, decided_at, update_id)
    VALUES (@deployment_id, @decision, @decided_by, sqlc.narg(step_position), @comment, @decided_at, @update_id)
    ON CONFLICT (update_id) DO NOTHING
    RETURNING id, decision, decided_by, step_position, comment, decided_at, true AS created
)
SELECT id, decision, decided_by, step_position, comment, decided_at, created FROM ins
UNION ALL
SELECT id, decision, decided_by, step_position, comment, decided_at, false AS created
FROM deployment_decisions WHERE update_id = @update_id AND NOT EXISTS (SELECT 1 FROM ins);

-- name: DecisionsOfDeployment :many
-- DecisionsOfDeployment lists up to max_rows decisions of a deployment, oldest first.
SELECT decision, decided_by, step_position, comment, decided_at
FROM deployment_decisions
WHERE deployment_id = @deployment_id
ORDER BY id
LIMIT @max_rows;

-- name: SetDeploymentWaiting :execrows
-- SetDeploymentWaiting sets (or, with NULL, clears) what a running deployment waits
-- for a person to decide.
UPDATE deployments SET waiting = sqlc.narg(waiting)::jsonb
WHERE id = @id AND status IN ('pending', 'running');

-- name: DeploymentWaiting :one
SELECT waiting FROM deployments WHERE id = @id;

-- name: SupersedeFailedRequests :execrows
-- SupersedeFailedRequests marks the failed requests of a step as replaced by a retry.
UPDATE pending_dispatch_requests p SET superseded = true
WHERE p.deployment_id = @deployment_id::uuid AND p.step_position = @position::int AND NOT p.superseded
  AND (p.status IN ('failed', 'expired', 'cancelled')
       OR (p.status = 'dispatched' AND EXISTS (
           SELECT 1 FROM command_queue c
           WHERE c.dispatch_request_id = p.id AND c.dispatch_attempt = p.attempts
             AND c.status IN ('failed', 'cancelled', 'lost'))));

-- name: RestartStep :one
-- RestartStep sets a step running again for retry round, unless it reached that round.
UPDATE deployment_steps SET status = 'running', finished_at = NULL, retry_round = @round::int
WHERE deployment_id = @deployment_id AND position = @position AND retry_round < @round::int
RETURNING name;
