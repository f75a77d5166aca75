package soak_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/testrig/soak"
	"github.com/mantis-deploy/mantis/internal/testrig/testenv"
)

// The rework counts each request's deliveries (its command rows), groups the
// cancelled commands and the failed requests by reason with ids and numbers masked,
// and leaves out what was created before the load.
func TestReworkCountsDeliveriesAndReasons(t *testing.T) {
	t.Parallel()
	pool := testenv.MigratedPool(t)
	ctx := context.Background()
	enq := enqueueOnWeb1(t, pool, 4)
	start := time.Now().Add(-time.Hour)
	// Request 0 succeeded at its first delivery; 1 at its third, after two commands
	// cancelled unclaimed; 2 failed after one busy refusal; 3 predates the load.
	deliveries := []struct {
		created  time.Time
		status   string
		commands []string
		errors   []string
	}{
		{start.Add(time.Minute), "dispatched", []string{"succeeded"}, []string{""}},
		{start.Add(time.Minute), "dispatched", []string{"cancelled", "cancelled", "succeeded"},
			[]string{"command not claimed by any Thorax within delivery_timeout (1m0s)", "command not claimed by any Thorax within delivery_timeout (1m0s)", ""}},
		{start.Add(time.Minute), "failed", []string{"cancelled"}, []string{"listen agent " + uuid.NewString() + ": agent busy: every run slot"}},
		{start.Add(-time.Minute), "dispatched", []string{"cancelled", "succeeded"}, []string{"old", ""}},
	}
	for i, d := range deliveries {
		_, err := pool.Exec(ctx, `UPDATE pending_dispatch_requests SET created_at = $2, status = $3, last_error = 'budget spent' WHERE id = $1`,
			enq[i].ID, d.created, d.status)
		require.NoError(t, err)
		for attempt, status := range d.commands {
			_, err = pool.Exec(ctx, `INSERT INTO command_queue (dispatch_request_id, dispatch_attempt, target_id, command, timeout, priority, mode, status, error, finished_at)
				SELECT $1, $2, id, 'true', interval '1 minute', 'normal', 'poll', $3, nullif($4, ''), now() FROM targets WHERE name = 'web-1'`,
				enq[i].ID, attempt, status, d.errors[attempt])
			require.NoError(t, err)
		}
	}

	got, err := soak.ReadRework(ctx, pool, start)
	require.NoError(t, err)
	require.Equal(t, soak.Rework{
		Requests: 3, Succeeded: 2, Failed: 1, Commands: 5, Deliveries: [4]int{2, 0, 1, 0},
		Cancelled: []soak.Count{
			{What: "command not claimed by any Thorax within delivery_timeout (#m#s)", N: 2},
			{What: "listen agent #: agent busy: every run slot", N: 1},
		},
		Failures: []soak.Count{{What: "budget spent", N: 1}},
	}, got)
	require.Contains(t, got.Markdown(), "| 3 | 2 | 1 | 0 | 0 | 5 | 2.50 | – |")
}
