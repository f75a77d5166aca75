package schema_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/domain"
	"github.com/mantis-deploy/mantis/schema"
)

func TestDeliverWritesOneCommandPerRequestAndIsReplayable(t *testing.T) {
	t.Parallel()
	b := setupDispatch(t, "web-1", "web-2")
	b.enqueue(t, req("k1", "web-1", "high"), req("k2", "web-2", "low"))
	claim, err := schema.ClaimPending(b.ctx, b.pool, replica, 10)
	require.NoError(t, err)

	out, err := schema.DeliverClaimed(b.ctx, b.pool, replica, refs(claim.Claimed), deliverOpts)
	require.NoError(t, err)
	require.Len(t, out, 2)
	for _, o := range out {
		require.Equal(t, domain.OutcomeDispatched, o.Outcome)
		require.NotNil(t, o.CommandID)
		require.NotNil(t, o.Command)
		require.Equal(t, "poll", o.Command.Mode)
		require.Equal(t, b.instance, *o.Command.AssignedInstanceID)
		require.Equal(t, domain.MaxDispatchRetries, o.Command.MaxRetries, "a first delivery leaves every retry")
	}
	require.Equal(t, "high", out[0].Command.Priority)

	replay, err := schema.DeliverClaimed(b.ctx, b.pool, replica, refs(claim.Claimed), deliverOpts)
	require.NoError(t, err)
	for i, o := range replay {
		require.Equal(t, domain.OutcomeDispatched, o.Outcome, "a replayed delivery reports the recorded outcome")
		require.Equal(t, *out[i].CommandID, *o.CommandID)
	}
	var commands int
	require.NoError(t, b.pool.QueryRow(b.ctx, `SELECT count(*) FROM command_queue`).Scan(&commands))
	require.Equal(t, 2, commands, "one command_queue row per request, replay or not")
}

func TestDeliverWithoutLiveThoraxBacksOffAndFailsAfterElevenDeliveries(t *testing.T) {
	t.Parallel()
	b := setupDispatch(t)
	b.addTarget(t, "orphan-host", nil) // no Thorax serves it
	id := b.enqueue(t, req("k1", "orphan-host", "normal"))[0].ID

	for attempt := 1; attempt <= domain.MaxDispatchDeliveries; attempt++ {
		// Skip the backoff: the claim only takes rows whose next attempt is due.
		_, err := b.pool.Exec(b.ctx, `UPDATE pending_dispatch_requests SET next_attempt_at = now() WHERE id = $1`, id)
		require.NoError(t, err)
		claim, err := schema.ClaimPending(b.ctx, b.pool, replica, 10)
		require.NoError(t, err)
		require.Len(t, claim.Claimed, 1, "attempt %d", attempt)
		out, err := schema.DeliverClaimed(b.ctx, b.pool, replica, refs(claim.Claimed), deliverOpts)
		require.NoError(t, err)
		require.Contains(t, out[0].Error, "no live Thorax for target orphan-host")
		status, attempts, _ := b.status(t, id)
		require.Equal(t, attempt, attempts)
		if attempt < domain.MaxDispatchDeliveries {
			require.Equal(t, domain.OutcomeRetry, out[0].Outcome)
			require.Equal(t, domain.StatusPending, status)
			require.NotNil(t, out[0].NextAttemptAt)
			// Backoff: 2 s doubling, equal jitter, capped at 5 min.
			var wait time.Duration
			require.NoError(t, b.pool.QueryRow(b.ctx, `SELECT next_attempt_at - now() FROM pending_dispatch_requests WHERE id = $1`, id).Scan(&wait))
			full := min(2*time.Second<<(attempt-1), 5*time.Minute)
			require.GreaterOrEqual(t, wait, full/2-time.Second, "attempt %d", attempt)
			require.LessOrEqual(t, wait, full, "attempt %d", attempt)
			none, err := schema.ClaimPending(b.ctx, b.pool, replica, 10)
			require.NoError(t, err)
			require.Empty(t, none.Claimed, "a request waiting for its backoff is not claimed")
		} else {
			require.Equal(t, domain.OutcomeFailed, out[0].Outcome)
			require.Equal(t, domain.StatusFailed, status, "the 11th failed delivery (the first and 10 retries) fails the request")
		}
	}
	_, err := b.pool.Exec(b.ctx, `UPDATE pending_dispatch_requests SET next_attempt_at = now() WHERE id = $1`, id)
	require.NoError(t, err)
	claim, err := schema.ClaimPending(b.ctx, b.pool, replica, 10)
	require.NoError(t, err)
	require.Empty(t, claim.Claimed, "a failed request is never claimed again")
}

func TestDeliverExpiresRequestThatAgedWhileClaimed(t *testing.T) {
	t.Parallel()
	b := setupDispatch(t, "web-1")
	id := b.enqueue(t, req("k", "web-1", "normal"))[0].ID
	claim, err := schema.ClaimPending(b.ctx, b.pool, replica, 10)
	require.NoError(t, err)
	_, err = b.pool.Exec(b.ctx, `UPDATE pending_dispatch_requests SET created_at = now() - interval '25 hours', expires_at = now() - interval '1 hour' WHERE id = $1`, id)
	require.NoError(t, err)
	out, err := schema.DeliverClaimed(b.ctx, b.pool, replica, refs(claim.Claimed), deliverOpts)
	require.NoError(t, err)
	require.Equal(t, domain.OutcomeExpired, out[0].Outcome)
	var commands int
	require.NoError(t, b.pool.QueryRow(b.ctx, `SELECT count(*) FROM command_queue`).Scan(&commands))
	require.Zero(t, commands)
}

func TestStaleEpochOutcomeIsRefused(t *testing.T) {
	t.Parallel()
	b := setupDispatch(t, "web-1")
	id := b.enqueue(t, req("k", "web-1", "normal"))[0].ID
	claim, err := schema.ClaimPending(b.ctx, b.pool, replica, 10)
	require.NoError(t, err)

	// The holder stalls past the processing window; another replica reclaims the row.
	reclaimed, err := schema.ReclaimOrphans(b.ctx, b.pool, 0)
	require.NoError(t, err)
	require.Len(t, reclaimed, 1)
	require.Equal(t, replica, reclaimed[0].OldHolder)
	require.Equal(t, claim.Claimed[0].Epoch+1, reclaimed[0].NewEpoch)

	out, err := schema.DeliverClaimed(b.ctx, b.pool, replica, refs(claim.Claimed), deliverOpts)
	require.NoError(t, err)
	require.Equal(t, domain.OutcomeStale, out[0].Outcome)
	status, _, _ := b.status(t, id)
	require.Equal(t, domain.StatusPending, status, "the stale holder's write changed nothing")

	// The survivor claims it with a newer epoch and delivers it once.
	claim2, err := schema.ClaimPending(b.ctx, b.pool, "replica-b", 10)
	require.NoError(t, err)
	require.Len(t, claim2.Claimed, 1)
	require.Greater(t, claim2.Claimed[0].Epoch, reclaimed[0].NewEpoch-1)
	out2, err := schema.DeliverClaimed(b.ctx, b.pool, "replica-b", refs(claim2.Claimed), deliverOpts)
	require.NoError(t, err)
	require.Equal(t, domain.OutcomeDispatched, out2[0].Outcome)
	stale, err := schema.DeliverClaimed(b.ctx, b.pool, replica, refs(claim.Claimed), deliverOpts)
	require.NoError(t, err)
	require.Equal(t, domain.OutcomeStale, stale[0].Outcome)
}
