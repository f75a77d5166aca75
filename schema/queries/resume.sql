-- Resuming a deployment from a step, and running one again (schema/resume.go).

-- name: DeploymentStatusAndSpec :one
-- DeploymentStatusAndSpec reads what a resume or a re-run starts from, without the
-- per-target results of the deployment view.
SELECT status, spec FROM deployments WHERE id = @id;

-- name: StepStatusesOfDeployment :many
SELECT position, status FROM deployment_steps WHERE deployment_id = @deployment_id ORDER BY position;

-- name: AllFailedTargetsOfStep :many
-- AllFailedTargetsOfStep names every target the step failed on (as FailedTargetsOfStep
-- counts a failure: the request failed, expired or was cancelled, or its latest
-- command failed, was cancelled or lost; a request a retry superseded does not
-- count), in deployment order, at most max_rows; registered says whether a target of
-- that name is registered now.
SELECT t.name AS target,
       EXISTS (SELECT 1 FROM targets n WHERE n.name = t.name AND n.deregistered_at IS NULL) AS registered
FROM pending_dispatch_requests p
JOIN targets t ON t.id = p.target_id
LEFT JOIN deployment_targets dt ON dt.deployment_id = p.deployment_id AND dt.target_id = p.target_id
LEFT JOIN command_queue c ON c.dispatch_request_id = p.id AND c.dispatch_attempt = p.attempts
WHERE p.deployment_id = @deployment_id::uuid AND p.step_position = @position::int AND NOT p.superseded
  AND (p.status IN ('failed', 'expired', 'cancelled')
       OR (p.status = 'dispatched' AND c.status IN ('failed', 'cancelled', 'lost')))
ORDER BY dt.ordinal NULLS LAST, t.name
LIMIT @max_rows;

-- name: RecordedTargetsOfDeployment :many
-- RecordedTargetsOfDeployment names a deployment's recorded targets in deployment
-- order, at most max_rows; registered says whether a target of that name is
-- registered now.
SELECT t.name AS target,
       EXISTS (SELECT 1 FROM targets n WHERE n.name = t.name AND n.deregistered_at IS NULL) AS registered
FROM deployment_targets dt JOIN targets t ON t.id = dt.target_id
WHERE dt.deployment_id = @deployment_id
ORDER BY dt.ordinal
LIMIT @max_rows;

-- name: LinkDeployment :execrows
-- LinkDeployment links a new deployment to the one it was made from, once.
UPDATE deployments
SET previous_deployment_id = @previous_deployment_id, relation = @relation, from_step = sqlc.narg(from_step)
WHERE id = @id AND previous_deployment_id IS NULL;

-- name: DeploymentLinkOf :one
SELECT previous_deployment_id, relation, from_step FROM deployments WHERE id = @id;
