package schema_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/schema"
)

// A claim retried after its first attempt committed gets that attempt's rows back, at
// the same epochs, and claims nothing more; they are not stranded until the orphan
// reclaim.
func TestRetriedClaimReturnsTheRowsItsFirstAttemptClaimed(t *testing.T) {
	t.Parallel()
	b := setupDispatch(t, "web-1")
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
		require.Equal(t, schema.OutcomeDispatched, o.Outcome)
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
