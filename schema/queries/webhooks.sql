-- Webhooks, their deliveries and the fan-out from the event log (schema/webhooks.go).

-- name: InsertWebhook :one
INSERT INTO webhooks (id, url, event_types, secret, created_by, allow_private_network)
VALUES (@id, @url, @event_types, @secret, @created_by, @allow_private_network)
RETURNING *;

-- name: ListWebhooks :many
SELECT * FROM webhooks ORDER BY created_at, id;

-- name: GetWebhook :one
SELECT * FROM webhooks WHERE id = @id;

-- name: DeleteWebhook :execrows
DELETE FROM webhooks WHERE id = @id;

-- name: LockWebhookCursor :one
-- LockWebhookCursor takes the fan-out's cursor for this transaction; a replica that
-- finds it locked by another gets no row and skips this round.
SELECT last_event_id FROM webhook_cursor FOR UPDATE SKIP LOCKED;

-- name: FanOutEvents :execrows
-- FanOutEvents inserts a delivery for every webhook that wants an event with
-- after < id <= through and that existed when the event happened: a webhook created
-- now is not sent what happened before it, even when the fan-out reaches it later.
-- The LIKE patterns are the webhook's event types with "*" turned into "%".
INSERT INTO webhook_deliveries (webhook_id, event_id)
SELECT w.id, e.id
FROM deployment_events e
JOIN webhooks w ON e.type LIKE ANY (
    SELECT replace(replace(t, '_', '\_'), '*', '%') FROM unnest(w.event_types) AS t)
WHERE e.id > @after AND e.id <= @through AND e.created_at >= w.created_at
ON CONFLICT (webhook_id, event_id) DO NOTHING;

-- name: MoveWebhookCursor :exec
UPDATE webhook_cursor SET last_event_id = @last_event_id WHERE last_event_id < @last_event_id;

-- name: ClaimWebhookDeliveries :many
-- ClaimWebhookDeliveries claims up to max_rows due deliveries: each one's attempts
-- moves on (its fencing token) and it is leased until lease_seconds from now, after
-- which another sender may claim it again.
WITH due AS (
    SELECT d.id FROM webhook_deliveries d
    WHERE d.status = 'pending' AND d.next_attempt_at <= now()
    ORDER BY d.next_attempt_at, d.id
    LIMIT @max_rows
    FOR UPDATE SKIP LOCKED
)
UPDATE webhook_deliveries d
SET attempts = d.attempts + 1, next_attempt_at = now() + make_interval(secs => @lease_seconds::float8)
FROM due, webhooks w, deployment_events e
WHERE d.id = due.id AND w.id = d.webhook_id AND e.id = d.event_id
RETURNING d.id, d.attempts, w.id AS webhook_id, w.url, w.secret, w.allow_private_network,
          e.id AS event_id, e.type AS event_type, e.deployment_id, e.data AS event_data, e.created_at AS event_at;

-- name: MarkWebhookDelivered :execrows
UPDATE webhook_deliveries
SET status = 'delivered', ended_at = now(), last_status = sqlc.narg(last_status), last_error = NULL
WHERE id = @id AND attempts = @attempts AND status = 'pending';

-- name: MarkWebhookAttemptFailed :execrows
-- MarkWebhookAttemptFailed records a failed send: the delivery waits for its next
-- attempt, or is failed for good (the dead-letter list) once attempts reach
-- max_attempts.
UPDATE webhook_deliveries
SET status = CASE WHEN attempts >= @max_attempts::int THEN 'failed' ELSE 'pending' END,
    ended_at = CASE WHEN attempts >= @max_attempts::int THEN now() END,
    next_attempt_at = now() + make_interval(secs => @backoff_seconds::float8),
    last_status = sqlc.narg(last_status), last_error = @last_error
WHERE id = @id AND attempts = @attempts AND status = 'pending';

-- name: ListWebhookDeliveries :many
-- ListWebhookDeliveries lists a webhook's deliveries in one status, newest first.
SELECT d.id, d.event_id, e.type AS event_type, e.deployment_id, d.status, d.attempts,
       d.last_status, d.last_error, d.created_at, d.ended_at
FROM webhook_deliveries d JOIN deployment_events e ON e.id = d.event_id
WHERE d.webhook_id = @webhook_id AND d.status = @status
ORDER BY d.id DESC
LIMIT @max_rows;

-- name: WebhookCursor :one
SELECT last_event_id FROM webhook_cursor;
