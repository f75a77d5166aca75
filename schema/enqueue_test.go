package schema_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/domain"
	"github.com/mantis-deploy/mantis/schema"
)

func TestEnqueueRejectsBadInputAndWritesNothing(t *testing.T) {
	t.Parallel()
	b := setupDispatch(t, "web-1")
	_, err := schema.EnqueueDispatchRequests(b.ctx, b.pool, []schema.NewDispatchRequest{
		req("ok", "web-1", "high"),
		req("unknown", "nope", "high"),
	})
	var inputErr *domain.InputError
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
	require.Equal(t, domain.DispatchRequestTTL, expires.Sub(created))
}

func TestEnqueueNotifiesListeners(t *testing.T) {
	t.Parallel()
	b := setupDispatch(t, "web-1")
	conn, err := b.pool.Acquire(b.ctx)
	require.NoError(t, err)
	defer conn.Release()
	require.NoError(t, schema.Listen(b.ctx, conn, schema.DispatchRequestsChannel))
	b.enqueue(t, req("k1", "web-1", "normal"), req("k2", "web-1", "normal"))
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	n, err := conn.Conn().WaitForNotification(ctx)
	require.NoError(t, err)
	require.Equal(t, string(schema.DispatchRequestsChannel), n.Channel)
}
