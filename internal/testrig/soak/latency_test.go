package soak_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/domain"
	"github.com/mantis-deploy/mantis/internal/testrig/soak"
	"github.com/mantis-deploy/mantis/internal/testrig/testenv"
	"github.com/mantis-deploy/mantis/schema"
)

func TestDispatchLatencyIsEnqueueToSuccessPerMinuteOfLoad(t *testing.T) {
	t.Parallel()
	pool := testenv.MigratedPool(t)
	ctx := context.Background()
	enq := enqueueOnWeb1(t, pool, 4)
	start := time.Now().Add(-time.Hour).Truncate(time.Second)
	// Enqueued at +10 s and +20 s (minute 1), +70 s (minute 2), and one an hour
	// later than the minutes asked for.
	for i, c := range []struct {
		enqueued time.Duration
		status   string
		took     time.Duration
	}{{10 * time.Second, "succeeded", time.Second}, {20 * time.Second, "succeeded", 3 * time.Second},
		{70 * time.Second, "failed", time.Second}, {50 * time.Minute, "succeeded", time.Second}} {
		created := start.Add(c.enqueued)
		_, err := pool.Exec(ctx, `UPDATE pending_dispatch_requests SET created_at = $2, status = 'dispatched' WHERE id = $1`, enq[i].ID, created)
		require.NoError(t, err)
		_, err = pool.Exec(ctx, `INSERT INTO command_queue (dispatch_request_id, dispatch_attempt, target_id, command, timeout, priority, mode, status, finished_at)
			SELECT $1, 0, id, 'true', interval '1 minute', 'normal', 'poll', $2, $3 FROM targets WHERE name = 'web-1'`,
			enq[i].ID, c.status, created.Add(c.took))
		require.NoError(t, err)
	}

	got, err := soak.DispatchLatency(ctx, pool, start, 3)
	require.NoError(t, err)
	require.Equal(t, []soak.LatencyMinute{
		{Index: 1, Enqueued: 2, Succeeded: 2, P50: 2 * time.Second, P99: 2980 * time.Millisecond, Completed: 2},
		{Index: 2, Enqueued: 1, Succeeded: 0, NotSucceeded: 1},
	}, got)
}

// enqueueOnWeb1 registers the poll target web-1 and enqueues n requests of `true` on it.
func enqueueOnWeb1(t *testing.T, pool *pgxpool.Pool, n int) []schema.EnqueuedRequest {
	t.Helper()
	ctx := context.Background()
	_, err := pool.Exec(ctx, `INSERT INTO targets (name, mode) VALUES ('web-1', 'poll')`)
	require.NoError(t, err)
	reqs := make([]schema.NewDispatchRequest, n)
	for i := range reqs {
		reqs[i] = schema.NewDispatchRequest{IdempotencyKey: uuid.NewString(), Target: "web-1", Command: "true", Priority: domain.PriorityNormal}
	}
	enq, err := schema.EnqueueDispatchRequests(ctx, pool, reqs)
	require.NoError(t, err)
	return enq
}
