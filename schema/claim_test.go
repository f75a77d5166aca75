package schema_test

import (
	"fmt"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/domain"
	"github.com/mantis-deploy/mantis/schema"
)

func TestClaimTakesHighBeforeNormalBeforeLowThenAge(t *testing.T) {
	t.Parallel()
	b := setupDispatch(t, "web-1")
	b.allowParallel(t) // many requests on one target at once
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
	require.Equal(t, domain.StatusPending, status)
	status, _, _ = b.status(t, high[0].ID)
	require.Equal(t, domain.StatusProcessing, status)

	again, err := schema.ClaimPending(b.ctx, b.pool, "replica-b", 10)
	require.NoError(t, err)
	require.Len(t, again.Claimed, 1, "claimed rows are not claimed twice")
	require.Equal(t, low[0].ID, again.Claimed[0].ID)
}

func TestClaimRaceHasOneWinnerPerRow(t *testing.T) {
	t.Parallel()
	b := setupDispatch(t, "web-1")
	b.allowParallel(t) // many requests on one target at once
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

// A claim retried after its first attempt committed gets that attempt's rows back, at
// the same epochs, and claims nothing more; they are not stranded until the orphan
// reclaim.
func TestRetriedClaimReturnsTheRowsItsFirstAttemptClaimed(t *testing.T) {
	t.Parallel()
	b := setupDispatch(t, "web-1")
	b.allowParallel(t) // many requests on one target at once
	for i := range 5 {
		b.enqueue(t, req(fmt.Sprintf("k%d", i), "web-1", "normal"))
	}
	const key = "run-1/7"
	first, err := schema.ClaimPendingFor(b.ctx, b.pool, replica, key, 2)
	require.NoError(t, err)
	require.Len(t, first.Claimed, 2)

	// The first attempt's answer is lost; the retry carries the same key.
	retry, err := schema.ClaimPendingFor(b.ctx, b.pool, replica, key, 2)
	require.NoError(t, err)
	require.Equal(t, refs(first.Claimed), refs(retry.Claimed), "the retry returns the committed claim, same ids and epochs")

	var pending int
	require.NoError(t, b.pool.QueryRow(b.ctx, `SELECT count(*) FROM pending_dispatch_requests WHERE status = 'pending'`).Scan(&pending))
	require.Equal(t, 3, pending, "the retry claimed nothing more")

	// The retried claim's rows deliver at their epochs.
	out, err := schema.DeliverClaimed(b.ctx, b.pool, replica, refs(retry.Claimed), deliverOpts)
	require.NoError(t, err)
	for _, o := range out {
		require.Equal(t, domain.OutcomeDispatched, o.Outcome)
	}

	// Once delivered, the same key claims afresh (its rows left processing), and the next
	// claim of the run takes the next rows.
	next, err := schema.ClaimPendingFor(b.ctx, b.pool, replica, "run-1/9", 2)
	require.NoError(t, err)
	require.Len(t, next.Claimed, 2)
	require.NotContains(t, refs(next.Claimed), refs(first.Claimed)[0])

	// Another replica's rows are never returned under this replica's key.
	other, err := schema.ClaimPendingFor(b.ctx, b.pool, "replica-b", "run-1/9", 5)
	require.NoError(t, err)
	require.Len(t, other.Claimed, 1, "replica-b claims the one row left, not replica-a's")
}
