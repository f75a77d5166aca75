package e2e_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/mantis-deploy/mantis/internal/domain"
	"github.com/mantis-deploy/mantis/internal/testrig/testenv"
	"github.com/mantis-deploy/mantis/schema"
)

// dispatchFixture is a database with a live Thorax instance serving some targets, and
// the Temporal server the replicas share.
type dispatchFixture struct {
	ctx      context.Context
	url      string
	pool     *pgxpool.Pool
	temporal testenv.Temporal
	targets  []string
}

func setupDispatchFixture(t *testing.T, targets int) dispatchFixture {
	t.Helper()
	ctx := context.Background()
	url := testenv.MigratedDatabaseURL(t)
	cfg, err := pgxpool.ParseConfig(url)
	require.NoError(t, err)
	cfg.AfterConnect = schema.AfterConnect // the enqueue is Mantis's, on connections like a replica's
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	// The dispatch path is measured here, not the per-target concurrency default (one
	// running command), so the fixture lets its targets run many commands at once.
	_, err = schema.SetLimit(ctx, pool, schema.Limit{Name: domain.DefaultTargetLimit, Scope: domain.LimitScopeTarget, MaxRunning: schema.MaxLimitRunning}, "test")
	require.NoError(t, err)
	f := dispatchFixture{ctx: ctx, url: url, pool: pool, temporal: testenv.TemporalServer(t)}
	instance := uuid.New()
	_, err = pool.Exec(ctx, `INSERT INTO thorax_instances (id, name) VALUES ($1, 'thorax-e2e')`, instance)
	require.NoError(t, err)
	for i := range targets {
		name := fmt.Sprintf("host-%03d", i)
		_, err := pool.Exec(ctx, `INSERT INTO targets (name, mode, assigned_instance_id) VALUES ($1, 'poll', $2)`, name, instance)
		require.NoError(t, err)
		f.targets = append(f.targets, name)
	}
	return f
}

func (f dispatchFixture) enqueue(t *testing.T, n int, prefix string) {
	t.Helper()
	const chunk = 1000
	for start := 0; start < n; start += chunk {
		var reqs []schema.NewDispatchRequest
		for i := start; i < min(start+chunk, n); i++ {
			reqs = append(reqs, schema.NewDispatchRequest{
				IdempotencyKey: fmt.Sprintf("%s-%d", prefix, i),
				Target:         f.targets[i%len(f.targets)],
				Command:        "true",
				Priority:       domain.Priorities[i%3],
			})
		}
		_, err := schema.EnqueueDispatchRequests(f.ctx, f.pool, reqs)
		require.NoError(t, err)
	}
}

func (f dispatchFixture) count(t *testing.T, query string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, f.pool.QueryRow(f.ctx, query, args...).Scan(&n))
	return n
}

// Three replicas as separate OS processes drain 10,000 requests: each is dispatched
// exactly once, with one command_queue row, and every replica wins some.
func TestThreeReplicasDrainTheQueueExactlyOnce(t *testing.T) {
	f := setupDispatchFixture(t, 20)
	prefix := uniqueName("race")
	var replicas []*replica
	for i := range 3 {
		// Started one after another against the same database and Temporal namespace:
		// nothing else is needed to add a replica.
		replicas = append(replicas, startReplica(t, replicaOptions{
			ID: fmt.Sprintf("%s-%d", prefix, i), DatabaseURL: f.url, Temporal: f.temporal,
		}))
	}
	const total = 10000
	f.enqueue(t, total, prefix)

	require.Eventually(t, func() bool {
		return f.count(t, `SELECT count(*) FROM pending_dispatch_requests WHERE status = 'dispatched'`) == total
	}, 3*time.Minute, 200*time.Millisecond, "not every request was dispatched")

	require.Equal(t, total, f.count(t, `SELECT count(*) FROM command_queue`), "one command per request")
	require.Equal(t, total, f.count(t, `SELECT count(DISTINCT dispatch_request_id) FROM command_queue`))
	require.Zero(t, f.count(t, `SELECT count(*) FROM pending_dispatch_requests WHERE claim_epoch <> 1`),
		"no request was claimed twice")
	for _, r := range replicas {
		won := f.count(t, `SELECT count(*) FROM pending_dispatch_requests WHERE claimed_by = $1`, r.ID)
		require.Positive(t, won, "replica %s won no claims", r.ID)
		t.Logf("replica %s dispatched %d", r.ID, won)

		// Its metrics say the same.
		resp, err := http.Get("http://" + r.HTTPAddr + "/metrics")
		require.NoError(t, err)
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NoError(t, err)
		require.Contains(t, string(body), fmt.Sprintf("mantis_dispatch_claims_won_total{replica=%q} %d", r.ID, won))
		require.Contains(t, string(body), `mantis_dispatch_queue_depth{priority="high",status="dispatched"}`)
		require.Contains(t, string(body), "mantis_dispatch_enqueue_to_dispatch_seconds_count")
	}
}

// A replica killed between claim and delivery loses only its in-flight claims: once
// the processing window passes, a survivor reclaims and dispatches them exactly once.
func TestCrashedReplicasClaimsAreReclaimedByASurvivor(t *testing.T) {
	f := setupDispatchFixture(t, 5)
	prefix := uniqueName("crash")
	doomed := startReplica(t, replicaOptions{
		ID: prefix + "-doomed", DatabaseURL: f.url, Temporal: f.temporal,
		Args: []string{"--test-pause-after-claim"},
	})
	const total = 50
	f.enqueue(t, total, prefix)
	require.Eventually(t, func() bool {
		return f.count(t, `SELECT count(*) FROM pending_dispatch_requests WHERE status = 'processing' AND claimed_by = $1`, doomed.ID) == total
	}, time.Minute, 100*time.Millisecond, "the doomed replica never claimed the batch")
	doomed.kill(t)

	survivor := startReplica(t, replicaOptions{
		ID: prefix + "-survivor", DatabaseURL: f.url, Temporal: f.temporal,
		PollInterval: "1s", ProcessingTimeout: "3s",
	})
	require.Eventually(t, func() bool {
		return f.count(t, `SELECT count(*) FROM pending_dispatch_requests WHERE status = 'dispatched' AND claimed_by = $1`, survivor.ID) == total
	}, 2*time.Minute, 200*time.Millisecond, "the survivor did not dispatch the orphans")

	require.Equal(t, total, f.count(t, `SELECT count(*) FROM command_queue`), "each orphan dispatched once")
	// Claimed by the doomed replica (1), reclaimed (2), claimed by the survivor (3).
	require.Equal(t, total, f.count(t, `SELECT count(*) FROM pending_dispatch_requests WHERE claim_epoch = 3`))
	require.Contains(t, survivor.log(), "reclaimed orphaned dispatch request")
}

// A dispatcher run that ends — terminated from the Web UI, or cancelled by an earlier
// shutdown that the replica could not see through — is started again: the replica
// keeps dispatching.
func TestReplicaRestartsItsEndedDispatcher(t *testing.T) {
	f := setupDispatchFixture(t, 1)
	r := startReplica(t, replicaOptions{ID: uniqueName("revive"), DatabaseURL: f.url, Temporal: f.temporal})
	c, err := client.Dial(client.Options{HostPort: f.temporal.Address, Namespace: f.temporal.Namespace})
	require.NoError(t, err)
	defer c.Close()
	id := "dispatcher:" + r.ID
	require.Eventually(t, func() bool {
		_, err := rawDescription(c.DescribeWorkflow(f.ctx, id, ""))
		return err == nil
	}, time.Minute, 100*time.Millisecond)
	require.NoError(t, c.TerminateWorkflow(f.ctx, id, "", "test: an operator terminated it"))

	f.enqueue(t, 5, uniqueName("after"))
	require.Eventually(t, func() bool {
		return f.count(t, `SELECT count(*) FROM pending_dispatch_requests WHERE status = 'dispatched'`) == 5
	}, time.Minute, 100*time.Millisecond, "nothing dispatched after the dispatcher ended")
	require.Contains(t, r.log(), "dispatcher workflow ended; starting it again")
}
