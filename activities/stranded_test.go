package activities_test

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/activities"
	"github.com/mantis-deploy/mantis/internal/contract/activityio"
	"github.com/mantis-deploy/mantis/internal/contract/events"
	"github.com/mantis-deploy/mantis/internal/domain"
	"github.com/mantis-deploy/mantis/internal/testrig/testenv"
	"github.com/mantis-deploy/mantis/schema"
)

// knownWorkflows stands in for Temporal: it knows the workflows of started and counts
// the look-ups.
type knownWorkflows struct {
	mu      sync.Mutex
	started map[uuid.UUID]bool
	asked   []uuid.UUID
}

func (k *knownWorkflows) Started(_ context.Context, id uuid.UUID) (bool, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.asked = append(k.asked, id)
	return k.started[id], nil
}

func TestMaintenanceFailsDeploymentsWhoseWorkflowNeverStarted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := testenv.MigratedPool(t)
	create := func(age string) uuid.UUID {
		id, _, err := schema.CreateDeployment(ctx, pool, schema.NewDeployment{ID: uuid.Must(uuid.NewV7()), Name: "d", Priority: "normal", Spec: []byte(`{}`)})
		require.NoError(t, err)
		_, err = pool.Exec(ctx, `UPDATE deployments SET created_at = now() - $2::interval WHERE id = $1`, id, age)
		require.NoError(t, err)
		return id
	}
	stranded := create("20 minutes")
	queued := create("20 minutes") // its workflow exists, it has not run yet
	fresh := create("1 minute")    // its client may still retry
	known := &knownWorkflows{started: map[uuid.UUID]bool{queued: true}}
	a := &activities.Activities{DB: pool, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Metrics: activities.NewMetrics(prometheus.NewRegistry(), pool), Deployments: known}

	res, err := a.MaintainDispatchQueue(ctx, activityio.MaintainDispatchQueueInput{ReplicaID: "r"})
	require.NoError(t, err)
	require.Equal(t, []uuid.UUID{stranded}, res.Stranded)
	require.ElementsMatch(t, []uuid.UUID{stranded, queued}, known.asked, "only deployments pending past the age are looked up")

	view, err := schema.GetDeployment(ctx, pool, stranded)
	require.NoError(t, err)
	require.Equal(t, domain.DeploymentFailed, view.Status)
	var reason string
	require.NoError(t, pool.QueryRow(ctx, `SELECT data->>'reason' FROM deployment_events WHERE deployment_id = $1 AND type = $2`,
		stranded, string(events.DeploymentFailed)).Scan(&reason))
	require.Equal(t, activities.StrandedReason, reason)
	for _, id := range []uuid.UUID{queued, fresh} {
		view, err := schema.GetDeployment(ctx, pool, id)
		require.NoError(t, err)
		require.Equal(t, domain.DeploymentPending, view.Status)
	}

	res, err = a.MaintainDispatchQueue(ctx, activityio.MaintainDispatchQueueInput{ReplicaID: "r"})
	require.NoError(t, err)
	require.Empty(t, res.Stranded, "a failed deployment is failed once")
}
