package schema

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/mantis-deploy/mantis/internal/domain"
	"github.com/mantis-deploy/mantis/schema/internal/dbsqlc"
)

// ClaimResult is one claim: the rows won, and how many candidates were lost to other
// replicas between load and update.
type ClaimResult struct {
	Claimed []domain.ClaimedRequest
	Lost    int
}

// ClaimPending claims up to limit pending requests for replica: priority first, then
// age, skipping rows waiting for their next attempt, rows past expiry and rows a
// concurrency limit holds back (schema/claim_limits.go). The claim is the seed's
// conditional UPDATE from pending to processing (only an update that still sees
// pending wins) with a new claim epoch. Claims of all replicas run one at a time (the
// claims lock, taken first), so a claim loses a row only to another writer of the
// queue (expiry, cancel), whose rows SKIP LOCKED passes over.
func ClaimPending(ctx context.Context, db TxBeginner, replica string, limit int) (ClaimResult, error) {
	var res ClaimResult
	err := inTx(ctx, db, func(tx pgx.Tx) error {
		var err error
		res, err = claimWithinLimits(ctx, tx, replica, "", limit)
		return err
	})
	return res, err
}

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
		if err := queries.LockClaimKey(ctx, tx, replica+"/"+key); err != nil {
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
		res, err = claimWithinLimits(ctx, tx, replica, key, limit)
		return err
	})
	return res, err
}

// heldUnder returns the rows replica holds in processing under key, in claim order.
func heldUnder(ctx context.Context, db DB, replica, key string) ([]domain.ClaimedRequest, error) {
	rows, err := queries.HeldUnderKey(ctx, db, dbsqlc.HeldUnderKeyParams{Replica: replica, ClaimKey: key})
	if err != nil {
		return nil, fmt.Errorf("reading rows claimed under %s: %w", key, err)
	}
	out := make([]domain.ClaimedRequest, len(rows))
	for i, r := range rows {
		out[i] = domain.ClaimedRequest{ID: r.ID, Epoch: r.ClaimEpoch, Target: r.Target, Priority: r.Priority, Attempts: int(r.Attempts), CreatedAt: r.CreatedAt}
	}
	return out, nil
}
