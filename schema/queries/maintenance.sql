-- Maintenance of the dispatch queue, safe to run from every replica at once
-- (schema/maintenance.go): orphan reclaim, expiry, and the requeue of failed deliveries.

-- name: ReclaimOrphans :many
-- ReclaimOrphans returns requests held in processing for longer than timeout to pending
-- and moves their epoch on, so a late write by the old holder is refused.
WITH orphans AS (
    SELECT id FROM pending_dispatch_requests
    WHERE status = 'processing' AND claimed_at < now() - @timeout::interval
    FOR UPDATE SKIP LOCKED
), old AS (
    SELECT p.id, p.claimed_by FROM pending_dispatch_requests p JOIN orphans o USING (id)
)
UPDATE pending_dispatch_requests p
SET status = 'pending', claim_epoch = p.claim_epoch + 1, claimed_by = NULL, claimed_at = NULL,
    last_error = format('reclaimed: held in processing by replica %s for over %s', old.claimed_by, @timeout::interval)
FROM old
WHERE p.id = old.id AND p.status = 'processing'
RETURNING p.id, old.claimed_by::text AS old_holder, p.claim_epoch;

-- name: ExpireRequests :many
-- ExpireRequests marks every request past its expiry as expired — pending, processing,
-- or dispatched with its command still queued (that command is cancelled with
-- command_error) — and returns their ids.
WITH due AS (
    SELECT p.id FROM pending_dispatch_requests p
    WHERE p.expires_at <= now()
      AND (p.status IN ('pending', 'processing')
           OR (p.status = 'dispatched' AND EXISTS (
                   SELECT 1 FROM command_queue c
                   WHERE c.dispatch_request_id = p.id AND c.dispatch_attempt = p.attempts AND c.status = 'queued')))
    FOR UPDATE OF p SKIP LOCKED
), cancelled AS (
    UPDATE command_queue c
    SET status = 'cancelled', finished_at = now(), error = @command_error::text
    FROM due
    WHERE c.dispatch_request_id = due.id AND c.status = 'queued'
)
UPDATE pending_dispatch_requests p
SET status = 'expired', finished_at = now(), claimed_by = NULL, last_error = @request_error::text
FROM due
WHERE p.id = due.id
RETURNING p.id;

-- name: FailDeliveries :many
-- FailDeliveries cancels the latest delivery's command of the requests that match and
-- returns each request to pending with attempts + 1 and a backoff — or to failed once
-- the failed delivery was the last of max_deliveries, or to expired past expiry. match
-- says which commands: 'unclaimed_for' those queued for longer than unclaimed_for;
-- 'held' command_id while holder_id holds it running at lease_epoch; 'unclaimed'
-- command_id while queued and not its request's last delivery.
WITH due AS (
    SELECT c.id AS command_id, p.id AS request_id
    FROM command_queue c
    JOIN pending_dispatch_requests p ON p.id = c.dispatch_request_id
                                     AND p.status = 'dispatched' AND c.dispatch_attempt = p.attempts
    WHERE CASE @match::text
            WHEN 'unclaimed_for' THEN c.status = 'queued' AND c.created_at < now() - @unclaimed_for::interval
            WHEN 'held' THEN c.id = @command_id::uuid AND c.holder_instance_id = @holder_id::uuid
                             AND c.lease_epoch = @lease_epoch::bigint AND c.status = 'running'
            WHEN 'unclaimed' THEN c.id = @command_id::uuid AND c.status = 'queued'
                                  AND p.attempts + 1 < @max_deliveries::int
          END
    FOR UPDATE OF c, p SKIP LOCKED
), cancelled AS (
    UPDATE command_queue c SET status = 'cancelled', finished_at = now(), error = @reason::text
    FROM due WHERE c.id = due.command_id
)
UPDATE pending_dispatch_requests p
SET attempts = p.attempts + 1,
    status = CASE WHEN p.expires_at <= now() THEN 'expired'
                  WHEN p.attempts + 1 >= @max_deliveries::int THEN 'failed'
                  ELSE 'pending' END,
    finished_at = CASE WHEN p.expires_at <= now() OR p.attempts + 1 >= @max_deliveries::int THEN now() END,
    next_attempt_at = now() + dispatch_backoff(p.attempts + 1),
    claimed_by = NULL, last_error = @reason::text
FROM due
WHERE p.id = due.request_id
RETURNING p.id, due.command_id, p.status, p.next_attempt_at;

-- name: QueueDepth :many
-- QueueDepth counts dispatch requests by status and priority.
SELECT status, priority, count(*) AS requests FROM pending_dispatch_requests GROUP BY status, priority;
