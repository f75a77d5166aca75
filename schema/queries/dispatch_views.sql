-- Dispatch requests as operators inspect them (schema/dispatch_views.go).

-- name: ListDispatchRequests :many
-- ListDispatchRequests returns requests newest first with what explains their state:
-- their latest command, whether their target is deregistered or served by a live
-- Thorax, the concurrency limit holding it back when it is pending (its target's
-- own limit before a label limit, then by name), and the database clock. Empty
-- filters do not filter.
SELECT p.id, p.idempotency_key, t.name AS target, p.deployment_id, p.step_position, p.command, p.priority, p.status,
       p.attempts, p.created_at, p.expires_at, p.next_attempt_at, p.claimed_by, p.claimed_at, p.claim_epoch,
       p.dispatched_at, p.finished_at, p.last_error, c.id AS command_id, c.status AS command_status,
       (t.deregistered_at IS NOT NULL)::bool AS deregistered,
       EXISTS (SELECT 1 FROM thorax_instances i
               WHERE i.id = t.assigned_instance_id AND i.status = 'live'
                 AND i.last_heartbeat_at > now() - @heartbeat_timeout::interval)::bool AS live,
       coalesce(CASE WHEN p.status = 'pending' THEN (
           SELECT h.name FROM (
               SELECT tl.name, 0 AS rank FROM (
                   SELECT l.name, l.max_running FROM concurrency_limits l
                   WHERE l.scope = 'target' AND (l.value = t.name OR l.value IS NULL)
                   ORDER BY l.value IS NULL LIMIT 1) tl
               WHERE target_running(p.target_id, tl.max_running) >= tl.max_running
               UNION ALL
               SELECT l.name, 1 FROM concurrency_limits l
               WHERE l.scope = 'label' AND t.labels ->> l.label = l.value
                 AND label_running(l.label, l.value, l.max_running) >= l.max_running
           ) h ORDER BY h.rank, h.name LIMIT 1) END, '')::text AS held_by,
       now()::timestamptz AS now
FROM pending_dispatch_requests p
JOIN targets t ON t.id = p.target_id
LEFT JOIN command_queue c ON c.dispatch_request_id = p.id AND c.dispatch_attempt = p.attempts
WHERE (sqlc.narg(id)::uuid IS NULL OR p.id = sqlc.narg(id)::uuid)
  AND (coalesce(cardinality(@statuses::text[]), 0) = 0 OR p.status = ANY(@statuses::text[]))
  AND (@target::text = '' OR t.name = @target::text)
  AND (sqlc.narg(deployment_id)::uuid IS NULL OR p.deployment_id = sqlc.narg(deployment_id)::uuid)
  AND (sqlc.narg(before)::uuid IS NULL
       OR (p.created_at, p.id) < (SELECT b.created_at, b.id FROM pending_dispatch_requests b WHERE b.id = sqlc.narg(before)::uuid))
ORDER BY p.created_at DESC, p.id DESC
LIMIT @max_rows::int;
