package schema_test

import (
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/domain"
	"github.com/mantis-deploy/mantis/schema"
)

func TestRequestsPastTheirTTLExpire(t *testing.T) {
	t.Parallel()
	b := setupDispatch(t, "web-1")
	b.allowParallel(t) // many requests on one target at once
	pending := b.enqueue(t, req("pending", "web-1", "normal"))[0].ID
	processing := b.enqueue(t, req("processing", "web-1", "normal"))[0].ID
	fresh := b.enqueue(t, req("fresh", "web-1", "normal"))[0].ID
	_, err := b.pool.Exec(b.ctx, `UPDATE pending_dispatch_requests
		SET created_at = now() - interval '25 hours', expires_at = now() - interval '1 hour'
		WHERE id = ANY($1)`, []uuid.UUID{pending, processing})
	require.NoError(t, err)
	_, err = b.pool.Exec(b.ctx, `UPDATE pending_dispatch_requests SET status = 'processing', claimed_by = 'x', claimed_at = now() WHERE id = $1`, processing)
	require.NoError(t, err)

	claim, err := schema.ClaimPending(b.ctx, b.pool, replica, 10)
	require.NoError(t, err)
	require.Len(t, claim.Claimed, 1, "an expired request is never claimed")
	require.Equal(t, fresh, claim.Claimed[0].ID)

	expired, err := schema.ExpireRequests(b.ctx, b.pool)
	require.NoError(t, err)
	require.ElementsMatch(t, []uuid.UUID{pending, processing}, expired)
	for _, id := range []uuid.UUID{pending, processing} {
		status, _, lastError := b.status(t, id)
		require.Equal(t, domain.StatusExpired, status)
		require.Equal(t, "expired "+domain.DispatchRequestTTLText+" after creation", *lastError)
	}
	again, err := schema.ExpireRequests(b.ctx, b.pool)
	require.NoError(t, err)
	require.Empty(t, again, "expiry is idempotent")
}

func TestReclaimOnlyTakesRowsPastTheWindow(t *testing.T) {
	t.Parallel()
	b := setupDispatch(t, "web-1")
	b.enqueue(t, req("k", "web-1", "normal"))
	_, err := schema.ClaimPending(b.ctx, b.pool, replica, 10)
	require.NoError(t, err)
	reclaimed, err := schema.ReclaimOrphans(b.ctx, b.pool, 300*time.Second)
	require.NoError(t, err)
	require.Empty(t, reclaimed, "a fresh claim is not an orphan")
}

func TestUndeliveredCommandGoesBackToPending(t *testing.T) {
	t.Parallel()
	b := setupDispatch(t, "web-1")
	id := b.enqueue(t, req("k", "web-1", "normal"))[0].ID
	claim, err := schema.ClaimPending(b.ctx, b.pool, replica, 10)
	require.NoError(t, err)
	out, err := schema.DeliverClaimed(b.ctx, b.pool, replica, refs(claim.Claimed), deliverOpts)
	require.NoError(t, err)
	require.Equal(t, domain.OutcomeDispatched, out[0].Outcome)

	none, err := schema.RequeueUndelivered(b.ctx, b.pool, time.Hour)
	require.NoError(t, err)
	require.Empty(t, none)
	requeued, err := schema.RequeueUndelivered(b.ctx, b.pool, 0)
	require.NoError(t, err)
	require.Len(t, requeued, 1)
	require.Equal(t, domain.OutcomeRetry, requeued[0].Outcome)
	status, attempts, lastErr := b.status(t, id)
	require.Equal(t, domain.StatusPending, status)
	require.Equal(t, 1, attempts)
	require.Contains(t, *lastErr, "not claimed by any Thorax within delivery_timeout")
	var cmdStatus string
	require.NoError(t, b.pool.QueryRow(b.ctx, `SELECT status FROM command_queue WHERE id = $1`, *out[0].CommandID).Scan(&cmdStatus))
	require.Equal(t, "cancelled", cmdStatus)

	// The next delivery writes a new command for the new attempt.
	_, err = b.pool.Exec(b.ctx, `UPDATE pending_dispatch_requests SET next_attempt_at = now() WHERE id = $1`, id)
	require.NoError(t, err)
	claim, err = schema.ClaimPending(b.ctx, b.pool, replica, 10)
	require.NoError(t, err)
	out, err = schema.DeliverClaimed(b.ctx, b.pool, replica, refs(claim.Claimed), deliverOpts)
	require.NoError(t, err)
	require.Equal(t, domain.OutcomeDispatched, out[0].Outcome)
	require.Equal(t, domain.MaxDispatchRetries-1, out[0].Command.MaxRetries)
}
