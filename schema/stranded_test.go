package schema_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/domain"
	"github.com/mantis-deploy/mantis/internal/testrig/testenv"
	"github.com/mantis-deploy/mantis/schema"
)

func newPendingDeployment(t *testing.T, ctx context.Context, db schema.DB, age time.Duration) uuid.UUID {
	t.Helper()
	id, _, err := schema.CreateDeployment(ctx, db, schema.NewDeployment{ID: uuid.Must(uuid.NewV7()), Name: "d", Priority: "normal", Spec: []byte(`{}`)})
	require.NoError(t, err)
	_, err = db.Exec(ctx, `UPDATE deployments SET created_at = now() - $2::interval WHERE id = $1`, id, age)
	require.NoError(t, err)
	return id
}

func TestPendingDeploymentsCreatedBeforeListsOnlyOldPendingOnes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := testenv.MigratedPool(t)
	old := newPendingDeployment(t, ctx, pool, 20*time.Minute)
	older := newPendingDeployment(t, ctx, pool, 30*time.Minute)
	newPendingDeployment(t, ctx, pool, time.Minute)
	ended := newPendingDeployment(t, ctx, pool, 40*time.Minute)
	_, err := schema.FinishDeployment(ctx, pool, ended, domain.DeploymentFailed, "gone")
	require.NoError(t, err)

	ids, err := schema.PendingDeploymentsCreatedBefore(ctx, pool, 15*time.Minute, 10)
	require.NoError(t, err)
	require.Equal(t, []uuid.UUID{older, old}, ids, "pending ones older than the age, oldest first")

	ids, err = schema.PendingDeploymentsCreatedBefore(ctx, pool, 15*time.Minute, 1)
	require.NoError(t, err)
	require.Equal(t, []uuid.UUID{older}, ids, "bounded")
}

// A workflow that starts after its deployment ended (failed because the workflow had
// never started) must not run it.
func TestStartDeploymentRefusesADeploymentThatEnded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := testenv.MigratedPool(t)
	id := newPendingDeployment(t, ctx, pool, 0)
	_, err := schema.FinishDeployment(ctx, pool, id, domain.DeploymentFailed, "never started")
	require.NoError(t, err)

	err = schema.StartDeployment(ctx, pool, id, []schema.StepRecord{{Name: "s", Command: "true", Timeout: time.Minute}}, nil)
	require.ErrorIs(t, err, schema.ErrDeploymentEnded)
	require.ErrorContains(t, err, "failed")
	var steps int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM deployment_steps WHERE deployment_id = $1`, id).Scan(&steps))
	require.Zero(t, steps, "nothing recorded for an ended deployment")

	running := newPendingDeployment(t, ctx, pool, 0)
	require.NoError(t, schema.StartDeployment(ctx, pool, running, nil, nil))
	require.NoError(t, schema.StartDeployment(ctx, pool, running, nil, nil), "a retry of a start that committed")
}
