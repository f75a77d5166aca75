-- Dispatch requests as operators inspect them (schema/dispatch_views.go).

-- name: ListDispatchRequests :many
-- ListDispatchRequests returns requests newest first with what explains their state:
-- their latest command, whether their target is deregistered or served by a live
-- Thorax, and the database clock. Empty filters do not filter.
SELECT p.id, p.idempotency_key, t.name AS target, p.deployment_id, p.step_position, p.command, p.priority, p.status,
       p.attempts, p.created_at, p.expires_at, p.next_attempt_at, p.claimed_by, p.claimed_at, p.claim_epoch,
       p.dispatched_at, p.finished_at, p.last_error, c.id AS command_id, c.status AS command_status,
       (t.deregistered_at IS NOT NULL)::bool AS deregistered,
       EXISTS (SELECT 1 FROM thorax_instances i
               WHERE i.id = t.assigned_instance_id AND i.status = 'live'
                 AND i.last_heartbeat_at > now() - @heartbeat_timeout::interval)::bool AS live,
       now()::timestamptz AS now
FROM pending_dispatch_requests p
JOIN targets t ON t.id = p.target_id
LEFT JOIN command_queue c ON c.dispatch_request_id = p.id AND c.dispatch_attempt = p.attempts
WHERE (coalesce(cardinality(@statuses::text[]), 0) = 0 OR p.status = ANY(@statuses::text[]))
  AND (@target::text = '' OR t.name = @target::text)
  AND (sqlc.narg(deployment_id)::uuid IS NULL OR p.deployment_id = sqlc.narg(deployment_id)::uuid)
  AND (sqlc.narg(before)::uuid IS NULL
       OR (p.created_at, p.id) < (SELECT b.created_at, b.id FROM pending_dispatch_requests b WHERE b.id = sqlc.narg(before)::uuid))
ORDER BY p.created_at DESC, p.id DESC
LIMIT @max_rows::int;
