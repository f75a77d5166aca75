-- Deliver: what became of each claimed request, recorded in one transaction
-- (schema/deliver.go).

-- name: LoadClaimedBatch :many
-- LoadClaimedBatch locks the claimed requests and reads what their delivery needs:
-- whether replica still holds each at its epoch, its target's liveness, and the command
-- an earlier run of the same delivery wrote. Each request is read and locked by its
-- primary key (a LATERAL subquery, which the planner cannot turn into a hash join):
-- on a queue that has just filled, the planner's guesses made it read and hash the
-- whole table for a batch of a few hundred rows. row_at is the row's address, which
-- the lock keeps until the commit: RecordDeliveryOutcomes finds the rows by it.
SELECT p.id, p.row_at, p.status,
       (p.claim_epoch = b.epoch AND p.claimed_by IS NOT DISTINCT FROM @replica::text)::bool AS held,
       p.attempts, (p.expires_at <= now())::bool AS expired, (now() - p.created_at)::interval AS queued,
       p.last_error, p.next_attempt_at, p.priority, t.name AS target, t.mode, t.assigned_instance_id,
       EXISTS (SELECT 1 FROM thorax_instances i
               WHERE i.id = t.assigned_instance_id AND i.status = 'live'
                 AND i.last_heartbeat_at > now() - @heartbeat_timeout::interval)::bool AS live,
       (t.deregistered_at IS NOT NULL)::bool AS deregistered, coalesce(p.trace_parent, '')::text AS trace_parent,
       (SELECT c.id FROM command_queue c
        WHERE c.dispatch_request_id = p.id AND c.dispatch_attempt = p.attempts) AS existing_command_id
FROM (SELECT unnest(@ids::uuid[]) AS id, unnest(@epochs::bigint[]) AS epoch) AS b
CROSS JOIN LATERAL (
    SELECT r.id, r.ctid AS row_at, r.status, r.claim_epoch, r.claimed_by, r.attempts, r.expires_at, r.created_at, r.last_error,
           r.next_attempt_at, r.priority, r.target_id, r.trace_parent
    FROM pending_dispatch_requests r WHERE r.id = b.id
    FOR UPDATE
) AS p
JOIN targets t ON t.id = p.target_id;

-- name: RecordDeliveryOutcomes :many
-- RecordDeliveryOutcomes writes a command_queue row for each dispatched request
-- (command_ids, command_requests and command_retries side by side) and moves each
-- request of request_ids to its new status: dispatched; pending again after a backoff
-- (added to the database clock, the one all replicas share); failed; or expired. A
-- failed delivery (pending or failed) counts an attempt. It returns each request's next
-- attempt time. command_rows and request_rows are the requests' addresses, as
-- LoadClaimedBatch read them under its lock in the same transaction: the rows are read
-- and updated by address (TID scans), never found by hashing the whole table.
WITH commands AS (
    INSERT INTO command_queue (id, dispatch_request_id, dispatch_attempt, target_id, deployment_id, step_position,
                               command, timeout, env, working_dir, priority, mode, assigned_instance_id, max_retries,
                               trace_parent)
    SELECT n.id, p.id, p.attempts, p.target_id, p.deployment_id, p.step_position,
           p.command, p.timeout, p.env, p.working_dir, p.priority, t.mode, t.assigned_instance_id, n.retries,
           p.trace_parent
    FROM (SELECT unnest(@command_ids::uuid[]) AS id, unnest(@command_rows::tid[]) AS row_at,
                 unnest(@command_retries::int[]) AS retries) AS n
    CROSS JOIN LATERAL ( -- LIMIT keeps it a lookup by address rather than a join the planner may hash
        SELECT r.id, r.attempts, r.target_id, r.deployment_id, r.step_position, r.command, r.timeout, r.env,
               r.working_dir, r.priority, r.trace_parent
        FROM pending_dispatch_requests r WHERE r.ctid = n.row_at LIMIT 1
    ) AS p
    JOIN targets t ON t.id = p.target_id
)
UPDATE pending_dispatch_requests p
SET status = o.status,
    attempts = CASE WHEN o.status IN ('pending', 'failed') THEN p.attempts + 1 ELSE p.attempts END,
    dispatched_at = CASE WHEN o.status = 'dispatched' THEN now() ELSE p.dispatched_at END,
    finished_at = CASE WHEN o.status IN ('failed', 'expired') THEN now() ELSE p.finished_at END,
    next_attempt_at = CASE WHEN o.status = 'pending' THEN now() + dispatch_backoff(p.attempts + 1)
                           ELSE p.next_attempt_at END,
    last_error = nullif(o.err, '')
FROM (SELECT unnest(@request_ids::uuid[]) AS id, unnest(@statuses::text[]) AS status, unnest(@errors::text[]) AS err) AS o
-- The addresses come through a subquery, whose array the planner takes for a few
-- rows: handed a parameter of hundreds, it would rather hash the whole table.
WHERE p.ctid = ANY(ARRAY(SELECT unnest(@request_rows::tid[]))) AND p.id = o.id
RETURNING p.id, p.next_attempt_at;
