-- What Mandible settles when nobody reports (schema/settle.go).

-- name: UnservedListenTargets :many
-- UnservedListenTargets lists listen-mode targets that no live instance serves.
SELECT t.id, t.name, t.assigned_instance_id FROM targets t
LEFT JOIN thorax_instances i ON i.id = t.assigned_instance_id
WHERE t.mode = 'listen' AND t.deregistered_at IS NULL AND (i.id IS NULL OR i.status <> 'live')
ORDER BY t.name;

-- name: AssignListenTarget :one
-- AssignListenTarget gives a target to the live instance with the fewest targets among
-- those whose scope lets them serve it, provided it is still assigned to
-- from_instance_id: a concurrent assignment wins once. No row means no such instance
-- is live or the target moved meanwhile.
UPDATE targets SET assigned_instance_id = pick.id, updated_at = now()
FROM targets me
CROSS JOIN LATERAL (
    SELECT i.id FROM thorax_instances i
    LEFT JOIN targets o ON o.assigned_instance_id = i.id AND o.deregistered_at IS NULL
    WHERE i.status = 'live' AND thorax_may_serve(i.scope_patterns, i.scope_labels, me.name, me.labels)
    GROUP BY i.id ORDER BY count(o.id), i.id LIMIT 1) AS pick
WHERE targets.id = @target_id::uuid AND me.id = targets.id
  AND targets.assigned_instance_id IS NOT DISTINCT FROM sqlc.narg(from_instance_id)::uuid
RETURNING pick.id;

-- name: FailOverdueCommands :many
-- FailOverdueCommands fails commands running grace past their timeout, counted from
-- their claim, each with a target.failed event.
WITH overdue AS (
    UPDATE command_queue c
    SET status = 'failed', finished_at = now(),
        error = format('%s (timeout %s, grace %s)', @reason::text, c.timeout, @grace::interval)
    FROM targets t
    WHERE c.status = 'running' AND t.id = c.target_id
      AND c.claimed_at < now() - c.timeout - @grace::interval
    RETURNING c.id, c.deployment_id, c.step_position, t.name, c.error
), events AS (
    INSERT INTO deployment_events (deployment_id, type, data)
    SELECT o.deployment_id, 'target.failed',
           jsonb_build_object('step_position', o.step_position, 'target', o.name, 'command_id', o.id, 'error', o.error)
    FROM overdue o WHERE o.deployment_id IS NOT NULL
)
SELECT id FROM overdue;

-- name: AddWorkflowNotice :exec
-- AddWorkflowNotice records that a deployment's workflow must be told it failed.
INSERT INTO deployment_workflow_notices (deployment_id, reason) VALUES (@deployment_id::uuid, @reason::text)
ON CONFLICT (deployment_id) DO NOTHING;

-- name: TakeWorkflowNotices :many
-- TakeWorkflowNotices returns up to max_rows notices, oldest first, counting an attempt
-- on each.
UPDATE deployment_workflow_notices n SET attempts = n.attempts + 1
FROM (SELECT deployment_id FROM deployment_workflow_notices ORDER BY created_at LIMIT @max_rows::int
      FOR UPDATE SKIP LOCKED) AS due
WHERE n.deployment_id = due.deployment_id
RETURNING n.deployment_id, n.reason, n.attempts;

-- name: DeleteWorkflowNotice :exec
-- DeleteWorkflowNotice removes a notice once its workflow was told.
DELETE FROM deployment_workflow_notices WHERE deployment_id = @deployment_id::uuid;
