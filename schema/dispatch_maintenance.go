package schema

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
)

// ReclaimedRequest is an orphan returned to pending: its holder kept it in processing
// past the processing timeout.
type ReclaimedRequest struct {
	ID        uuid.UUID `json:"id"`
	OldHolder string    `json:"old_holder"`
	NewEpoch  int64     `json:"new_epoch"`
}

// ReclaimOrphans returns requests left in processing for longer than timeout to
// pending and moves their epoch on, so a late write by the old holder is refused.
// It is idempotent and safe to run from every replica at once.
func ReclaimOrphans(ctx context.Context, db DB, timeout time.Duration) ([]ReclaimedRequest, error) {
	rows, err := db.Query(ctx, `
		WITH orphans AS (
		    SELECT id FROM pending_dispatch_requests
		    WHERE status = 'processing' AND claimed_at < now() - make_interval(secs => $1)
		    FOR UPDATE SKIP LOCKED
		), old AS (
		    SELECT p.id, p.claimed_by FROM pending_dispatch_requests p JOIN orphans o USING (id)
		)
		UPDATE pending_dispatch_requests p
		SET status = 'pending', claim_epoch = p.claim_epoch + 1, claimed_by = NULL, claimed_at = NULL,
		    last_error = format('reclaimed: held in processing by replica %s for over %s', old.claimed_by, make_interval(secs => $1))
		FROM old
		WHERE p.id = old.id AND p.status = 'processing'
		RETURNING p.id, old.claimed_by, p.claim_epoch`, timeout.Seconds())
	if err != nil {
		return nil, fmt.Errorf("reclaiming orphans: %w", err)
	}
	defer rows.Close()
	var out []ReclaimedRequest
	for rows.Next() {
		var r ReclaimedRequest
		if err := rows.Scan(&r.ID, &r.OldHolder, &r.NewEpoch); err != nil {
			return nil, fmt.Errorf("reclaiming orphans: %w", err)
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// ExpireRequests marks every request past its expiry as expired, whatever its state —
// pending, processing, or dispatched with its command still unclaimed (that command is
// cancelled) — and returns their ids. An expired request is never dispatched again.
func ExpireRequests(ctx context.Context, db DB) ([]uuid.UUID, error) {
	rows, err := db.Query(ctx, `
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
		    SET status = 'cancelled', finished_at = now(), error = 'dispatch request expired 24h after creation'
		    FROM due
		    WHERE c.dispatch_request_id = due.id AND c.status = 'queued'
		)
		UPDATE pending_dispatch_requests p
		SET status = 'expired', finished_at = now(), claimed_by = NULL,
		    last_error = 'expired 24h after creation'
		FROM due
		WHERE p.id = due.id
		RETURNING p.id`)
	if err != nil {
		return nil, fmt.Errorf("expiring dispatch requests: %w", err)
	}
	defer rows.Close()
	var ids []uuid.UUID
	for rows.Next() {
		var id uuid.UUID
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("expiring dispatch requests: %w", err)
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}

// RedispatchResult is what became of a request whose delivery failed after dispatch.
type RedispatchResult struct {
	RequestID     uuid.UUID  `json:"request_id"`
	CommandID     uuid.UUID  `json:"command_id"`
	Outcome       string     `json:"outcome"` // OutcomeRetry or OutcomeFailed
	NextAttemptAt *time.Time `json:"next_attempt_at,omitempty"`
}

// RequeueUndelivered fails the delivery of commands no Thorax claimed within timeout:
// the command is cancelled and its request goes back to pending with attempts + 1 and a
// backoff, or to failed once it was the last of MaxDispatchDeliveries deliveries.
func RequeueUndelivered(ctx context.Context, db DB, timeout time.Duration) ([]RedispatchResult, error) {
	return failDelivery(ctx, db, fmt.Sprintf("command not claimed by any Thorax within delivery_timeout (%s)", timeout),
		`c.status = 'queued' AND c.created_at < now() - make_interval(secs => $3)`, timeout.Seconds())
}

// failDelivery cancels the commands matching where (a condition over command_queue c,
// whose arguments start at $3) and returns their requests to pending with attempts + 1
// and a backoff — or to failed once the budget is spent (the failed delivery was the
// last of MaxDispatchDeliveries), or to expired past expiry.
func failDelivery(ctx context.Context, db DB, reason, where string, args ...any) ([]RedispatchResult, error) {
	rows, err := db.Query(ctx, `
		WITH due AS (
		    SELECT c.id AS command_id, p.id AS request_id
		    FROM command_queue c
		    JOIN pending_dispatch_requests p ON p.id = c.dispatch_request_id
		                                     AND p.status = 'dispatched' AND c.dispatch_attempt = p.attempts
		    WHERE `+where+`
		    FOR UPDATE OF c, p SKIP LOCKED
		), cancelled AS (
		    UPDATE command_queue c SET status = 'cancelled', finished_at = now(), error = $1
		    FROM due WHERE c.id = due.command_id
		)
		UPDATE pending_dispatch_requests p
		SET attempts = p.attempts + 1,
		    status = CASE WHEN p.expires_at <= now() THEN 'expired'
		                  WHEN p.attempts + 1 >= $2 THEN 'failed'
		                  ELSE 'pending' END,
		    finished_at = CASE WHEN p.expires_at <= now() OR p.attempts + 1 >= $2 THEN now() END,
		    next_attempt_at = now() + dispatch_backoff(p.attempts + 1),
		    claimed_by = NULL, last_error = $1
		FROM due
		WHERE p.id = due.request_id
		RETURNING p.id, due.command_id, p.status, p.next_attempt_at`, append([]any{reason, MaxDispatchDeliveries}, args...)...)
	if err != nil {
		return nil, fmt.Errorf("failing deliveries: %w", err)
	}
	defer rows.Close()
	var out []RedispatchResult
	for rows.Next() {
		var (
			r      RedispatchResult
			status string
			at     time.Time
		)
		if err := rows.Scan(&r.RequestID, &r.CommandID, &status, &at); err != nil {
			return nil, fmt.Errorf("failing deliveries: %w", err)
		}
		switch status {
		case StatusFailed:
			r.Outcome = OutcomeFailed
		case StatusExpired:
			r.Outcome = OutcomeExpired
		default:
			r.Outcome = OutcomeRetry
			r.NextAttemptAt = &at
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// QueueDepth counts dispatch requests by status and priority.
func QueueDepth(ctx context.Context, db DB) (map[[2]string]int, error) {
	rows, err := db.Query(ctx, `SELECT status, priority, count(*) FROM pending_dispatch_requests GROUP BY 1, 2`)
	if err != nil {
		return nil, fmt.Errorf("counting dispatch requests: %w", err)
	}
	defer rows.Close()
	out := map[[2]string]int{}
	for rows.Next() {
		var status, priority string
		var n int
		if err := rows.Scan(&status, &priority, &n); err != nil {
			return nil, err
		}
		out[[2]string{status, priority}] = n
	}
	return out, rows.Err()
}
