package activities_test

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/mantis-deploy/mantis/activities"
	"github.com/mantis-deploy/mantis/internal/domain"
	"github.com/mantis-deploy/mantis/internal/testrig/testenv"
	"github.com/mantis-deploy/mantis/schema"
	"github.com/mantis-deploy/mantis/workflows"
)

// A claim whose first attempt commits and then dies (its result never reaches the
// workflow) is retried, and the retry hands over the rows the first attempt claimed:
// they are delivered within seconds, not left in processing for the 300 s reclaim.
func TestDispatcherDeliversTheRowsOfAClaimWhoseResultWasLost(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	pool := testenv.MigratedPool(t)
	_, err := pool.Exec(ctx, `
		INSERT INTO thorax_instances (id, name) VALUES ('00000000-0000-4000-8000-000000000001', 'thorax-1');
		INSERT INTO targets (name, mode, assigned_instance_id) VALUES ('web-1', 'poll', '00000000-0000-4000-8000-000000000001')`)
	require.NoError(t, err)
	// Three requests on one target at once: raise the per-target concurrency default.
	_, err = schema.SetLimit(ctx, pool, schema.Limit{Name: domain.DefaultTargetLimit, Scope: domain.LimitScopeTarget, MaxRunning: 10}, "test")
	require.NoError(t, err)
	reqs := make([]schema.NewDispatchRequest, 3)
	for i := range reqs {
		reqs[i] = schema.NewDispatchRequest{IdempotencyKey: string(rune('a' + i)), Target: "web-1", Command: "true", Priority: "normal"}
	}
	_, err = schema.EnqueueDispatchRequests(ctx, pool, reqs)
	require.NoError(t, err)

	var claims atomic.Int32
	var infoMu sync.Mutex
	var infos []activity.Info // of each claim attempt
	acts := &activities.Activities{
		DB: pool, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Dispatch: activities.DispatchConfig{ProcessingTimeout: 300 * time.Second, DeliveryTimeout: time.Hour, HeartbeatTimeout: time.Hour},
		Hooks: activities.Hooks{AfterClaim: func(ctx context.Context) {
			claims.Add(1)
			infoMu.Lock()
			infos = append(infos, activity.GetInfo(ctx))
			infoMu.Unlock()
			if activity.GetInfo(ctx).Attempt == 1 {
				panic("the worker dies after the claim committed")
			}
		}},
	}
	srv := testenv.TemporalServer(t)
	c, err := client.Dial(client.Options{HostPort: srv.Address, Namespace: srv.Namespace})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	w := worker.New(c, srv.TaskQueue, worker.Options{})
	w.RegisterWorkflowWithOptions(workflows.Dispatcher, workflow.RegisterOptions{Name: workflows.DispatcherWorkflowType})
	w.RegisterActivity(acts)
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "dispatcher-" + srv.TaskQueue, TaskQueue: srv.TaskQueue},
		workflows.DispatcherWorkflowType, workflows.DispatcherInput{ReplicaID: "replica-a", PollInterval: time.Hour, BatchSize: 10})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.TerminateWorkflow(context.Background(), run.GetID(), "", "test over") })

	require.Eventually(t, func() bool {
		var dispatched int
		err := pool.QueryRow(ctx, `SELECT count(*) FROM pending_dispatch_requests WHERE status = 'dispatched'`).Scan(&dispatched)
		return err == nil && dispatched == 3
	}, 60*time.Second, 100*time.Millisecond, "the first attempt's rows are delivered by the retry")
	require.GreaterOrEqual(t, claims.Load(), int32(2), "the claim was retried")
	// The claim is a local activity whose retry keeps the run and the activity id, so
	// the claim key finds the rows of the first attempt.
	infoMu.Lock()
	first, second := infos[0], infos[1]
	infoMu.Unlock()
	require.True(t, first.IsLocalActivity, "the dispatcher claims with a local activity")
	require.Equal(t, int32(2), second.Attempt)
	require.Equal(t, first.WorkflowExecution.RunID, second.WorkflowExecution.RunID)
	require.Equal(t, first.ActivityID, second.ActivityID)
	var keys []string
	rows, err := pool.Query(ctx, `SELECT DISTINCT claim_key FROM pending_dispatch_requests`)
	require.NoError(t, err)
	for rows.Next() {
		var k string
		require.NoError(t, rows.Scan(&k))
		keys = append(keys, k)
	}
	require.NoError(t, rows.Err())
	require.Equal(t, []string{first.WorkflowExecution.RunID + "/local-" + first.ActivityID}, keys, "one claim, under the local claim key")
	var commands int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM command_queue`).Scan(&commands))
	require.Equal(t, 3, commands, "each request delivered once")
}
