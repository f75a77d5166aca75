package schema_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/testenv"
	"github.com/mantis-deploy/mantis/schema"
)

// dispatchBundle is a migrated database with a live Thorax instance and targets.
type dispatchBundle struct {
	ctx      context.Context
	pool     *pgxpool.Pool
	instance uuid.UUID
}

const replica = "replica-a"

func setupDispatch(t *testing.T, targets ...string) dispatchBundle {
	t.Helper()
	ctx := context.Background()
	pool := testenv.MigratedPool(t)
	b := dispatchBundle{ctx: ctx, pool: pool, instance: uuid.New()}
	_, err := pool.Exec(ctx, `INSERT INTO thorax_instances (id, name) VALUES ($1, 'thorax-1')`, b.instance)
	require.NoError(t, err)
	for _, name := range targets {
		b.addTarget(t, name, &b.instance)
	}
	return b
}

func (b dispatchBundle) addTarget(t *testing.T, name string, instance *uuid.UUID) {
	t.Helper()
	_, err := b.pool.Exec(b.ctx, `INSERT INTO targets (name, mode, assigned_instance_id) VALUES ($1, 'poll', $2)`, name, instance)
	require.NoError(t, err)
}

func (b dispatchBundle) enqueue(t *testing.T, reqs ...schema.NewDispatchRequest) []schema.EnqueuedRequest {
	t.Helper()
	out, err := schema.EnqueueDispatchRequests(b.ctx, b.pool, reqs)
	require.NoError(t, err)
	return out
}

func req(key, target, priority string) schema.NewDispatchRequest {
	return schema.NewDispatchRequest{IdempotencyKey: key, Target: target, Command: "true", Priority: priority}
}

func (b dispatchBundle) status(t *testing.T, id uuid.UUID) (status string, attempts int, lastError *string) {
	t.Helper()
	require.NoError(t, b.pool.QueryRow(b.ctx, `SELECT status, attempts, last_error FROM pending_dispatch_requests WHERE id = $1`, id).
		Scan(&status, &attempts, &lastError))
	return
}

func refs(claimed []schema.ClaimedRequest) []schema.ClaimRef {
	out := make([]schema.ClaimRef, len(claimed))
	for i, c := range claimed {
		out[i] = schema.ClaimRef{ID: c.ID, Epoch: c.Epoch}
	}
	return out
}

var deliverOpts = schema.DeliverOptions{HeartbeatTimeout: time.Hour}

func TestEnqueueRejectsBadInputAndWritesNothing(t *testing.T) {
	t.Parallel()
	b := setupDispatch(t, "web-1")
	_, err := schema.EnqueueDispatchRequests(b.ctx, b.pool, []schema.NewDispatchRequest{
		req("ok", "web-1", "high"),
		req("unknown", "nope", "high"),
	})
	var inputErr *schema.InputError
	require.ErrorAs(t, err, &inputErr)
	require.ErrorContains(t, err, `requests[1].target: unknown target "nope"`)

	_, err = schema.EnqueueDispatchRequests(b.ctx, b.pool, []schema.NewDispatchRequest{
		{IdempotencyKey: "a", Target: "web-1", Command: "", Priority: "urgent"},
	})
	require.ErrorAs(t, err, &inputErr)
	require.ErrorContains(t, err, "requests[0].command: must not be empty")
	require.ErrorContains(t, err, `requests[0].priority: must be high, normal or low, got "urgent"`)

	var n int
	require.NoError(t, b.pool.QueryRow(b.ctx, `SELECT count(*) FROM pending_dispatch_requests`).Scan(&n))
	require.Zero(t, n, "a rejected enqueue writes nothing")
}

func TestEnqueueIsIdempotentAndSetsExpiry(t *testing.T) {
	t.Parallel()
	b := setupDispatch(t, "web-1")
	first := b.enqueue(t, req("k1", "web-1", "normal"), req("k2", "web-1", "low"))
	require.True(t, first[0].Created)
	second := b.enqueue(t, req("k1", "web-1", "normal"), req("k3", "web-1", "low"))
	require.False(t, second[0].Created)
	require.Equal(t, first[0].ID, second[0].ID)
	require.True(t, second[1].Created)

	var created, expires time.Time
	require.NoError(t, b.pool.QueryRow(b.ctx, `SELECT created_at, expires_at FROM pending_dispatch_requests WHERE id = $1`, first[0].ID).Scan(&created, &expires))
	require.Equal(t, schema.DispatchRequestTTL, expires.Sub(created))
}

func TestEnqueueNotifiesListeners(t *testing.T) {
	t.Parallel()
	b := setupDispatch(t, "web-1")
	conn, err := b.pool.Acquire(b.ctx)
	require.NoError(t, err)
	defer conn.Release()
	_, err = conn.Exec(b.ctx, "LISTEN mantis_dispatch_requests")
	require.NoError(t, err)
	b.enqueue(t, req("k1", "web-1", "normal"), req("k2", "web-1", "normal"))
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	n, err := conn.Conn().WaitForNotification(ctx)
	require.NoError(t, err)
	require.Equal(t, "mantis_dispatch_requests", n.Channel)
}

func TestClaimTakesHighBeforeNormalBeforeLowThenAge(t *testing.T) {
	t.Parallel()
	b := setupDispatch(t, "web-1")
	low := b.enqueue(t, req("low", "web-1", "low"))
	normal1 := b.enqueue(t, req("normal-1", "web-1", "normal"))
	normal2 := b.enqueue(t, req("normal-2", "web-1", "normal"))
	high := b.enqueue(t, req("high", "web-1", "high"))

	res, err := schema.ClaimPending(b.ctx, b.pool, replica, 3)
	require.NoError(t, err)
	require.Len(t, res.Claimed, 3)
	require.Equal(t, []uuid.UUID{high[0].ID, normal1[0].ID, normal2[0].ID},
		[]uuid.UUID{res.Claimed[0].ID, res.Claimed[1].ID, res.Claimed[2].ID})
	for _, c := range res.Claimed {
		require.Equal(t, int64(1), c.Epoch)
	}
	status, _, _ := b.status(t, low[0].ID)
	require.Equal(t, schema.StatusPending, status)
	status, _, _ = b.status(t, high[0].ID)
	require.Equal(t, schema.StatusProcessing, status)

	again, err := schema.ClaimPending(b.ctx, b.pool, "replica-b", 10)
	require.NoError(t, err)
	require.Len(t, again.Claimed, 1, "claimed rows are not claimed twice")
	require.Equal(t, low[0].ID, again.Claimed[0].ID)
}

func TestClaimRaceHasOneWinnerPerRow(t *testing.T) {
	t.Parallel()
	b := setupDispatch(t, "web-1")
	var reqs []schema.NewDispatchRequest
	for i := range 300 {
		reqs = append(reqs, req(fmt.Sprintf("k%d", i), "web-1", "normal"))
	}
	b.enqueue(t, reqs...)
	type result struct {
		ids []uuid.UUID
		err error
	}
	results := make(chan result, 3)
	for r := range 3 {
		go func() {
			var mine []uuid.UUID
			for {
				res, err := schema.ClaimPending(b.ctx, b.pool, fmt.Sprintf("replica-%d", r), 7)
				if err != nil {
					results <- result{err: err}
					return
				}
				if len(res.Claimed) == 0 {
					results <- result{ids: mine}
					return
				}
				for _, c := range res.Claimed {
					mine = append(mine, c.ID)
				}
			}
		}()
	}
	seen := map[uuid.UUID]bool{}
	for range 3 {
		r := <-results
		require.NoError(t, r.err)
		for _, id := range r.ids {
			require.False(t, seen[id], "request %s claimed twice", id)
			seen[id] = true
		}
	}
	require.Len(t, seen, 300)
}

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
		require.Equal(t, schema.OutcomeDispatched, o.Outcome)
		require.NotNil(t, o.CommandID)
		require.NotNil(t, o.Command)
		require.Equal(t, "poll", o.Command.Mode)
		require.Equal(t, b.instance, *o.Command.AssignedInstanceID)
		require.Equal(t, schema.MaxDispatchRetries, o.Command.MaxRetries, "a first delivery leaves every retry")
	}
	require.Equal(t, "high", out[0].Command.Priority)

	replay, err := schema.DeliverClaimed(b.ctx, b.pool, replica, refs(claim.Claimed), deliverOpts)
	require.NoError(t, err)
	for i, o := range replay {
		require.Equal(t, schema.OutcomeDispatched, o.Outcome, "a replayed delivery reports the recorded outcome")
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

	for attempt := 1; attempt <= schema.MaxDispatchDeliveries; attempt++ {
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
		if attempt < schema.MaxDispatchDeliveries {
			require.Equal(t, schema.OutcomeRetry, out[0].Outcome)
			require.Equal(t, schema.StatusPending, status)
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
			require.Equal(t, schema.OutcomeFailed, out[0].Outcome)
			require.Equal(t, schema.StatusFailed, status, "the 11th failed delivery (the first and 10 retries) fails the request")
		}
	}
	_, err := b.pool.Exec(b.ctx, `UPDATE pending_dispatch_requests SET next_attempt_at = now() WHERE id = $1`, id)
	require.NoError(t, err)
	claim, err := schema.ClaimPending(b.ctx, b.pool, replica, 10)
	require.NoError(t, err)
	require.Empty(t, claim.Claimed, "a failed request is never claimed again")
}

func TestRequestsOlderThan24HoursExpire(t *testing.T) {
	t.Parallel()
	b := setupDispatch(t, "web-1")
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
		status, _, _ := b.status(t, id)
		require.Equal(t, schema.StatusExpired, status)
	}
	again, err := schema.ExpireRequests(b.ctx, b.pool)
	require.NoError(t, err)
	require.Empty(t, again, "expiry is idempotent")
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
	require.Equal(t, schema.OutcomeExpired, out[0].Outcome)
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
	require.Equal(t, schema.OutcomeStale, out[0].Outcome)
	status, _, _ := b.status(t, id)
	require.Equal(t, schema.StatusPending, status, "the stale holder's write changed nothing")

	// The survivor claims it with a newer epoch and delivers it once.
	claim2, err := schema.ClaimPending(b.ctx, b.pool, "replica-b", 10)
	require.NoError(t, err)
	require.Len(t, claim2.Claimed, 1)
	require.Greater(t, claim2.Claimed[0].Epoch, reclaimed[0].NewEpoch-1)
	out2, err := schema.DeliverClaimed(b.ctx, b.pool, "replica-b", refs(claim2.Claimed), deliverOpts)
	require.NoError(t, err)
	require.Equal(t, schema.OutcomeDispatched, out2[0].Outcome)
	stale, err := schema.DeliverClaimed(b.ctx, b.pool, replica, refs(claim.Claimed), deliverOpts)
	require.NoError(t, err)
	require.Equal(t, schema.OutcomeStale, stale[0].Outcome)
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
	require.Equal(t, schema.OutcomeDispatched, out[0].Outcome)

	none, err := schema.RequeueUndelivered(b.ctx, b.pool, time.Hour)
	require.NoError(t, err)
	require.Empty(t, none)
	requeued, err := schema.RequeueUndelivered(b.ctx, b.pool, 0)
	require.NoError(t, err)
	require.Len(t, requeued, 1)
	require.Equal(t, schema.OutcomeRetry, requeued[0].Outcome)
	status, attempts, lastErr := b.status(t, id)
	require.Equal(t, schema.StatusPending, status)
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
	require.Equal(t, schema.OutcomeDispatched, out[0].Outcome)
	require.Equal(t, schema.MaxDispatchRetries-1, out[0].Command.MaxRetries)
}

func TestListExplainsWhyRequestsArePending(t *testing.T) {
	t.Parallel()
	b := setupDispatch(t, "web-1")
	b.addTarget(t, "lonely", nil)
	b.enqueue(t, req("served", "web-1", "normal"), req("unserved", "lonely", "normal"), req("claimed", "web-1", "high"))
	_, err := schema.ClaimPending(b.ctx, b.pool, replica, 1) // takes the high one
	require.NoError(t, err)

	views, err := schema.ListDispatchRequests(b.ctx, b.pool, schema.DispatchRequestFilter{}, time.Hour)
	require.NoError(t, err)
	reasons := map[string]string{}
	for _, v := range views {
		reasons[v.IdempotencyKey] = v.Reason
	}
	require.Contains(t, reasons["served"], "waiting for a replica to claim it")
	require.Contains(t, reasons["unserved"], "no live Thorax for target lonely")
	require.Contains(t, reasons["claimed"], "claimed by replica "+replica)

	pendingOnly, err := schema.ListDispatchRequests(b.ctx, b.pool, schema.DispatchRequestFilter{Statuses: []string{"pending"}}, time.Hour)
	require.NoError(t, err)
	require.Len(t, pendingOnly, 2)
}

func TestInputErrorIsTyped(t *testing.T) {
	t.Parallel()
	err := error(&schema.InputError{Problems: []string{"a", "b"}})
	var ie *schema.InputError
	require.True(t, errors.As(err, &ie))
	require.Equal(t, "invalid request: a; b", err.Error())
}
