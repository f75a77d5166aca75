package schema_test

import (
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/domain"
	"github.com/mantis-deploy/mantis/schema"
)

// deliver makes the request's next delivery at once and returns its command.
func (b dispatchBundle) deliver(t *testing.T, request uuid.UUID) domain.DeliveryOutcome {
	t.Helper()
	_, err := b.pool.Exec(b.ctx, `UPDATE pending_dispatch_requests SET next_attempt_at = now() WHERE id = $1`, request)
	require.NoError(t, err)
	claim, err := schema.ClaimPending(b.ctx, b.pool, replica, 10)
	require.NoError(t, err)
	require.Len(t, claim.Claimed, 1)
	out, err := schema.DeliverClaimed(b.ctx, b.pool, replica, refs(claim.Claimed), deliverOpts)
	require.NoError(t, err)
	require.Equal(t, domain.OutcomeDispatched, out[0].Outcome, out[0].Error)
	return out[0]
}

// The seed: "Failed dispatches are retried up to 10 times" — a first delivery and
// up to 10 retries, so at most 11 command_queue rows, and the 11th failed delivery
// (not the 10th) fails the request. Handing a command back unrun costs nothing.
func TestBudgetIsAFirstDeliveryAndTenRetries(t *testing.T) {
	t.Parallel()
	b := setupDispatch(t, "web-1")
	id := b.enqueue(t, req("k1", "web-1", "normal"))[0].ID
	require.Equal(t, 10, domain.MaxDispatchRetries, "the seed's figure")
	require.Equal(t, 11, domain.MaxDispatchDeliveries)

	for delivery := 1; delivery <= domain.MaxDispatchDeliveries; delivery++ {
		out := b.deliver(t, id)
		require.Equal(t, domain.MaxDispatchRetries-(delivery-1), out.Command.MaxRetries, "delivery %d leaves the retries not spent", delivery)

		// A drain hands the command back unrun: no delivery is spent.
		cmds, err := schema.FetchPendingCommands(b.ctx, b.pool, schema.FetchCommandsRequest{InstanceID: b.instance, PollTargets: []string{"web-1"}, Max: 1})
		require.NoError(t, err)
		require.Len(t, cmds, 1)
		n, err := schema.ReleaseCommands(b.ctx, b.pool, b.instance, []schema.CommandLease{{ID: cmds[0].ID, Epoch: cmds[0].LeaseEpoch}})
		require.NoError(t, err)
		require.Equal(t, 1, n)
		_, attempts, _ := b.status(t, id)
		require.Equal(t, delivery-1, attempts, "a release costs no attempt")

		// Nobody claims it again: the delivery fails.
		failed, err := schema.RequeueUndelivered(b.ctx, b.pool, 0)
		require.NoError(t, err)
		require.Len(t, failed, 1)
		status, attempts, _ := b.status(t, id)
		require.Equal(t, delivery, attempts)
		if delivery < domain.MaxDispatchDeliveries {
			require.Equal(t, domain.OutcomeRetry, failed[0].Outcome, "failed delivery %d leaves retries", delivery)
			require.Equal(t, domain.StatusPending, status, "failed delivery %d", delivery)
			continue
		}
		require.Equal(t, domain.OutcomeFailed, failed[0].Outcome, "the 11th failed delivery fails the request")
		require.Equal(t, domain.StatusFailed, status)
	}
	var rows int
	require.NoError(t, b.pool.QueryRow(b.ctx, `SELECT count(*) FROM command_queue WHERE dispatch_request_id = $1`, id).Scan(&rows))
	require.Equal(t, domain.MaxDispatchDeliveries, rows, "one command_queue row per delivery, 11 at most")
	claim, err := schema.ClaimPending(b.ctx, b.pool, replica, 10)
	require.NoError(t, err)
	require.Empty(t, claim.Claimed, "a failed request is never delivered again")
}

// A nudge whose broker retry failed asks for another dispatch of a command nobody
// claimed (seed "Retry Behaviour", step 4). Mandible fences it: only the request's
// latest delivery, still queued, is redispatched; and it refuses the last delivery's
// without failing it, since polling may still claim it.
func TestRedispatchOfAnUnclaimedCommandIsFenced(t *testing.T) {
	t.Parallel()
	b := setupDispatch(t, "web-1")
	id := b.enqueue(t, req("k1", "web-1", "normal"))[0].ID
	first := b.deliver(t, id)

	res, err := schema.ScheduleRedispatch(b.ctx, b.pool, b.instance, *first.CommandID, schema.UnclaimedLeaseEpoch, "nudge failed twice")
	require.NoError(t, err)
	require.Equal(t, domain.OutcomeRetry, res.Outcome)
	_, attempts, lastErr := b.status(t, id)
	require.Equal(t, 1, attempts)
	require.Equal(t, "nudge failed twice", *lastErr)

	_, err = schema.ScheduleRedispatch(b.ctx, b.pool, b.instance, *first.CommandID, schema.UnclaimedLeaseEpoch, "again")
	require.ErrorIs(t, err, schema.ErrNotHeld, "the same give-up twice spends one attempt")
	require.ErrorContains(t, err, "is cancelled")

	second := b.deliver(t, id)
	_, err = schema.ScheduleRedispatch(b.ctx, b.pool, b.instance, *first.CommandID, schema.UnclaimedLeaseEpoch, "late")
	require.ErrorIs(t, err, schema.ErrNotHeld, "an older delivery's give-up is refused")
	cmds, err := schema.FetchPendingCommands(b.ctx, b.pool, schema.FetchCommandsRequest{InstanceID: b.instance, PollTargets: []string{"web-1"}, Max: 1})
	require.NoError(t, err)
	require.Len(t, cmds, 1)
	_, err = schema.ScheduleRedispatch(b.ctx, b.pool, b.instance, *second.CommandID, schema.UnclaimedLeaseEpoch, "claimed meanwhile")
	require.ErrorIs(t, err, schema.ErrNotHeld)
	require.ErrorContains(t, err, "is running: it was claimed or finished since")
	_, attempts, _ = b.status(t, id)
	require.Equal(t, 1, attempts, "refusals spend nothing")

	dead := uuid.New()
	_, err = b.pool.Exec(b.ctx, `INSERT INTO thorax_instances (id, name, status) VALUES ($1, 'gone', 'dead')`, dead)
	require.NoError(t, err)
	_, err = schema.ScheduleRedispatch(b.ctx, b.pool, dead, *second.CommandID, schema.UnclaimedLeaseEpoch, "from the dead")
	require.ErrorIs(t, err, schema.ErrInstanceDead)

	// The last delivery: Mandible refuses, and the command stays queued.
	_, err = b.pool.Exec(b.ctx, `UPDATE command_queue SET status = 'cancelled' WHERE id = $1`, *second.CommandID)
	require.NoError(t, err)
	_, err = b.pool.Exec(b.ctx, `UPDATE pending_dispatch_requests SET status = 'pending', attempts = $2 WHERE id = $1`, id, domain.MaxDispatchRetries)
	require.NoError(t, err)
	last := b.deliver(t, id)
	require.Zero(t, last.Command.MaxRetries, "the last delivery has no retry left")
	res, err = schema.ScheduleRedispatch(b.ctx, b.pool, b.instance, *last.CommandID, schema.UnclaimedLeaseEpoch, "nudge failed")
	require.NoError(t, err)
	require.Equal(t, schema.OutcomeBudgetSpent, res.Outcome)
	var st string
	require.NoError(t, b.pool.QueryRow(b.ctx, `SELECT status FROM command_queue WHERE id = $1`, *last.CommandID).Scan(&st))
	require.Equal(t, "queued", st, "polling may still claim the last delivery")
}

// A result is fenced by its lease epoch and by who sends it: the holder, or an
// instance forwarding it for the command's own target, while the epoch is current; a
// replay is accepted once; a stale epoch is refused and says so without naming an
// epoch; any other caller is refused with ErrNotOwn, whatever the epoch.
func TestResultIsFencedByTheLeaseEpochAndItsSender(t *testing.T) {
	t.Parallel()
	b := setupDispatch(t, "web-1")
	id := b.enqueue(t, req("k1", "web-1", "normal"))[0].ID
	b.deliver(t, id)
	cmds, err := schema.FetchPendingCommands(b.ctx, b.pool, schema.FetchCommandsRequest{InstanceID: b.instance, PollTargets: []string{"web-1"}, Max: 1})
	require.NoError(t, err)
	cmd := cmds[0]
	require.EqualValues(t, 1, cmd.LeaseEpoch)
	store := func(instance uuid.UUID, epoch int64, target string) (schema.StoredResult, error) {
		return schema.StoreCommandResult(b.ctx, b.pool, schema.ResultToStore{
			Instance: instance, Command: cmd.ID, Epoch: epoch, Target: target, Result: schema.CommandResult{ExitCode: 0, Output: "ok"}})
	}

	// The holder handed it back (nobody holds it now) and claimed it again: epoch 1 is
	// stale. A report for its own target is told why.
	_, err = schema.ReleaseCommands(b.ctx, b.pool, b.instance, []schema.CommandLease{{ID: cmd.ID, Epoch: 1}})
	require.NoError(t, err)
	_, err = store(b.instance, 1, "web-1")
	require.ErrorIs(t, err, schema.ErrNotHeld)
	require.ErrorContains(t, err, "handed back unrun")
	_, err = store(b.instance, 1, "")
	require.ErrorIs(t, err, schema.ErrNotOwn, "released, the command is held by nobody")
	again, err := schema.FetchPendingCommands(b.ctx, b.pool, schema.FetchCommandsRequest{InstanceID: b.instance, PollTargets: []string{"web-1"}, Max: 1})
	require.NoError(t, err)
	require.EqualValues(t, 2, again[0].LeaseEpoch)
	_, err = store(b.instance, 1, "")
	require.ErrorIs(t, err, schema.ErrNotHeld)
	require.ErrorContains(t, err, "stale lease epoch")
	require.NotRegexp(t, `epoch \d|current`, err.Error(), "a refusal names no epoch")

	// Another instance, at the current epoch: refused unless it reports for the
	// command's own target, and the refusal tells it nothing of the lease.
	forwarder := uuid.New()
	for _, target := range []string{"", "web-2"} {
		_, err = store(forwarder, 2, target)
		require.ErrorIs(t, err, schema.ErrNotOwn, "forwarded for target %q", target)
		require.NotContains(t, err.Error(), "epoch")
		_, err = store(forwarder, 1, target)
		require.ErrorIs(t, err, schema.ErrNotOwn, "a stale epoch from a stranger is refused as not its own")
	}
	var status string
	require.NoError(t, b.pool.QueryRow(b.ctx, `SELECT status FROM command_queue WHERE id = $1`, cmd.ID).Scan(&status))
	require.Equal(t, "running", status, "nothing was stored")

	// Forwarded for its own target, it is stored, and records who delivered it.
	stored, err := store(forwarder, 2, "web-1")
	require.NoError(t, err)
	require.False(t, stored.Replayed)
	require.Equal(t, "succeeded", stored.Status)
	var holder, deliveredBy uuid.UUID
	require.NoError(t, b.pool.QueryRow(b.ctx, `SELECT holder_instance_id, result_instance_id FROM command_queue WHERE id = $1`, cmd.ID).Scan(&holder, &deliveredBy))
	require.Equal(t, b.instance, holder)
	require.Equal(t, forwarder, deliveredBy)

	replay, err := store(b.instance, 2, "")
	require.NoError(t, err, "a replay through the holder is accepted")
	require.True(t, replay.Replayed)
	_, err = store(forwarder, 1, "web-1")
	require.ErrorContains(t, err, "stale lease epoch")

	// A command Mandible failed without a result (overdue) does not take a late
	// result as a replay: it is refused, saying why.
	id2 := b.enqueue(t, req("k2", "web-1", "normal"))[0].ID
	b.deliver(t, id2)
	cmds, err = schema.FetchPendingCommands(b.ctx, b.pool, schema.FetchCommandsRequest{InstanceID: b.instance, PollTargets: []string{"web-1"}, Max: 1})
	require.NoError(t, err)
	_, err = b.pool.Exec(b.ctx, `UPDATE command_queue SET status = 'failed', error = 'overdue' WHERE id = $1`, cmds[0].ID)
	require.NoError(t, err)
	_, err = schema.StoreCommandResult(b.ctx, b.pool, schema.ResultToStore{Instance: b.instance, Command: cmds[0].ID, Epoch: cmds[0].LeaseEpoch, Result: schema.CommandResult{ExitCode: 0}})
	require.ErrorIs(t, err, schema.ErrNotHeld)
	require.ErrorContains(t, err, "was failed by mandible")
}
