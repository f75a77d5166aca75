package schema

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/mantis-deploy/mantis/internal/domain"
	"github.com/mantis-deploy/mantis/schema/internal/dbsqlc"
)

// The dispatch queue's maintenance, run by every replica's dispatcher: orphan reclaim,
// expiry, and the requeue of deliveries that failed after dispatch. Each is idempotent
// and safe to run from every replica at once.

// ReclaimOrphans returns requests left in processing for longer than timeout to
// pending and moves their epoch on, so a late write by the old holder is refused.
func ReclaimOrphans(ctx context.Context, db DB, timeout time.Duration) ([]domain.ReclaimedRequest, error) {
	rows, err := queries.ReclaimOrphans(ctx, db, timeout)
	if err != nil {
		return nil, fmt.Errorf("reclaiming orphans: %w", err)
	}
	var out []domain.ReclaimedRequest
	for _, r := range rows {
		out = append(out, domain.ReclaimedRequest{ID: r.ID, OldHolder: r.OldHolder, NewEpoch: r.ClaimEpoch})
	}
	return out, nil
}

// ExpireRequests marks every request past its expiry as expired, whatever its state —
// pending, processing, or dispatched with its command still unclaimed (that command is
// cancelled) — and returns their ids. An expired request is never dispatched again.
func ExpireRequests(ctx context.Context, db DB) ([]uuid.UUID, error) {
	ids, err := queries.ExpireRequests(ctx, db, dbsqlc.ExpireRequestsParams{
		RequestError: expiredText, CommandError: "dispatch request " + expiredText,
	})
	if err != nil {
		return nil, fmt.Errorf("expiring dispatch requests: %w", err)
	}
	if len(ids) == 0 {
		return nil, nil
	}
	return ids, nil
}

// Which commands failDelivery fails: the values of the FailDeliveries query's match.
const (
	// matchUnclaimedFor: commands queued for longer than a delivery timeout.
	matchUnclaimedFor = "unclaimed_for"
	// matchHeld: one command its holder holds running at a lease epoch.
	matchHeld = "held"
	// matchUnclaimed: one queued command that is not its request's last delivery.
	matchUnclaimed = "unclaimed"
)

// RequeueUndelivered fails the delivery of commands no Thorax claimed within timeout:
// the command is cancelled and its request goes back to pending with attempts + 1 and a
// backoff, or to failed once it was the last of MaxDispatchDeliveries deliveries.
func RequeueUndelivered(ctx context.Context, db DB, timeout time.Duration) ([]domain.RedispatchResult, error) {
	return failDelivery(ctx, db, dbsqlc.FailDeliveriesParams{
		Match:        matchUnclaimedFor,
		UnclaimedFor: timeout,
		Reason:       fmt.Sprintf("command not claimed by any Thorax within delivery_timeout (%s)", timeout),
	})
}

// failDelivery cancels the commands p matches and returns their requests to pending
// with attempts + 1 and a backoff — or to failed once the budget is spent (the failed
// delivery was the last of MaxDispatchDeliveries), or to expired past expiry.
func failDelivery(ctx context.Context, db DB, p dbsqlc.FailDeliveriesParams) ([]domain.RedispatchResult, error) {
	p.MaxDeliveries = domain.MaxDispatchDeliveries
	rows, err := queries.FailDeliveries(ctx, db, p)
	if err != nil {
		return nil, fmt.Errorf("failing deliveries: %w", err)
	}
	var out []domain.RedispatchResult
	for _, row := range rows {
		r := domain.RedispatchResult{RequestID: row.ID, CommandID: row.CommandID}
		switch row.Status {
		case domain.StatusFailed:
			r.Outcome = domain.OutcomeFailed
		case domain.StatusExpired:
			r.Outcome = domain.OutcomeExpired
		default:
			at := row.NextAttemptAt
			r.Outcome, r.NextAttemptAt = domain.OutcomeRetry, &at
		}
		out = append(out, r)
	}
	return out, nil
}

// QueueDepth counts dispatch requests by status and priority.
func QueueDepth(ctx context.Context, db DB) (map[[2]string]int, error) {
	rows, err := queries.QueueDepth(ctx, db)
	if err != nil {
		return nil, fmt.Errorf("counting dispatch requests: %w", err)
	}
	out := make(map[[2]string]int, len(rows))
	for _, r := range rows {
		out[[2]string{r.Status, r.Priority}] = int(r.Requests)
	}
	return out, nil
}
