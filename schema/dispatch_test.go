package schema_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/domain"
	"github.com/mantis-deploy/mantis/internal/testrig/testenv"
	"github.com/mantis-deploy/mantis/schema"
)

// dispatchBundle is a migrated database with a live Thorax instance and targets.
type dispatchBundle struct {
	ctx      context.Context
	pool     *pgxpool.Pool
	instance uuid.UUID
}

const replica = "replica-a"

func setupDispatch(t testing.TB, targets ...string) dispatchBundle {
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

func (b dispatchBundle) addTarget(t testing.TB, name string, instance *uuid.UUID) {
	t.Helper()
	_, err := b.pool.Exec(b.ctx, `INSERT INTO targets (name, mode, assigned_instance_id) VALUES ($1, 'poll', $2)`, name, instance)
	require.NoError(t, err)
}

func (b dispatchBundle) enqueue(t testing.TB, reqs ...schema.NewDispatchRequest) []schema.EnqueuedRequest {
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

func refs(claimed []domain.ClaimedRequest) []domain.ClaimRef {
	out := make([]domain.ClaimRef, len(claimed))
	for i, c := range claimed {
		out[i] = domain.ClaimRef{ID: c.ID, Epoch: c.Epoch}
	}
	return out
}

var deliverOpts = schema.DeliverOptions{HeartbeatTimeout: time.Hour}

// The expiry messages print the TTL the enqueue sets, in the short form people write.
func TestDispatchRequestTTLText(t *testing.T) {
	require.Equal(t, "24h", domain.DispatchRequestTTLText)
	require.Equal(t, 24*time.Hour, domain.DispatchRequestTTL)
}
