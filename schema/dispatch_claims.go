package schema

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// ClaimPendingFor is ClaimPending under a claim key: the identity of one claim (the
// dispatcher run and its claim activity), the same on every attempt of that claim.
// When rows that replica claimed under key are still in processing, an earlier attempt
// committed and its answer was lost (the worker died, the activity timed out): those
// rows are returned as they were claimed, and nothing new is claimed, so the batch is
// delivered now rather than reclaimed as orphans 300 s later. Attempts of one key are
// serialised, so a retry that overlaps a slow first attempt finds its rows too.
func ClaimPendingFor(ctx context.Context, db TxBeginner, replica, key string, limit int) (ClaimResult, error) {
	if key == "" {
		return ClaimResult{}, fmt.Errorf("claiming dispatch requests: the claim key is empty")
	}
	var res ClaimResult
	err := inTx(ctx, db, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended($1, 0))`, replica+"/"+key); err != nil {
			return fmt.Errorf("locking claim %s: %w", key, err)
		}
		held, err := heldUnder(ctx, tx, replica, key)
		if err != nil {
			return err
		}
		if len(held) > 0 {
			res = ClaimResult{Claimed: held}
			return nil
		}
		res, err = claimKeyed(ctx, tx, replica, key, limit)
		return err
	})
	return res, err
}

// heldUnder returns the rows replica holds in processing under key, in claim order.
func heldUnder(ctx context.Context, db DB, replica, key string) ([]ClaimedRequest, error) {
	rows, err := db.Query(ctx, `
		SELECT p.id, p.claim_epoch, t.name, p.priority, p.attempts, p.created_at
		FROM pending_dispatch_requests p
		JOIN targets t ON t.id = p.target_id
		WHERE p.status = 'processing' AND p.claimed_by = $1 AND p.claim_key = $2
		ORDER BY p.priority_rank, p.created_at`, replica, key)
	if err != nil {
		return nil, fmt.Errorf("reading rows claimed under %s: %w", key, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (ClaimedRequest, error) {
		var c ClaimedRequest
		err := r.Scan(&c.ID, &c.Epoch, &c.Target, &c.Priority, &c.Attempts, &c.CreatedAt)
		return c, err
	})
	if err != nil {
		return nil, fmt.Errorf("reading rows claimed under %s: %w", key, err)
	}
	return out, nil
}

// claimKeyed is the seed's conditional UPDATE from pending to processing, recording key
// (none when it is empty).
func claimKeyed(ctx context.Context, db DB, replica, key string, limit int) (ClaimResult, error) {
	rows, err := db.Query(ctx, `
		WITH candidates AS (
		    SELECT id, priority_rank, created_at
		    FROM pending_dispatch_requests
		    WHERE status = 'pending' AND next_attempt_at <= now() AND expires_at > now()
		    ORDER BY priority_rank, created_at
		    LIMIT $2
		    FOR UPDATE SKIP LOCKED
		), claimed AS (
		    UPDATE pending_dispatch_requests p
		    SET status = 'processing', claimed_by = $1, claimed_at = now(), claim_epoch = p.claim_epoch + 1,
		        claim_key = nullif($3, '')
		    FROM candidates c
		    WHERE p.id = c.id AND p.status = 'pending'
		    RETURNING p.id, p.claim_epoch, p.target_id, p.priority, p.attempts, p.created_at
		)
		SELECT c.id, cl.claim_epoch, t.name, cl.priority, cl.attempts, cl.created_at
		FROM candidates c
		LEFT JOIN claimed cl ON cl.id = c.id
		LEFT JOIN targets t ON t.id = cl.target_id
		ORDER BY c.priority_rank, c.created_at`, replica, limit, key)
	if err != nil {
		return ClaimResult{}, fmt.Errorf("claiming dispatch requests: %w", err)
	}
	defer rows.Close()
	var res ClaimResult
	for rows.Next() {
		var (
			id       uuid.UUID
			epoch    *int64
			target   *string
			priority *string
			attempts *int
			created  *time.Time
		)
		if err := rows.Scan(&id, &epoch, &target, &priority, &attempts, &created); err != nil {
			return ClaimResult{}, fmt.Errorf("claiming dispatch requests: %w", err)
		}
		if epoch == nil {
			res.Lost++
			continue
		}
		res.Claimed = append(res.Claimed, ClaimedRequest{ID: id, Epoch: *epoch, Target: *target, Priority: *priority, Attempts: *attempts, CreatedAt: *created})
	}
	if err := rows.Err(); err != nil {
		return ClaimResult{}, fmt.Errorf("claiming dispatch requests: %w", err)
	}
	return res, nil
}
