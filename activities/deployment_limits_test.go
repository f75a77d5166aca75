package activities_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/mantis-deploy/mantis/activities"
	"github.com/mantis-deploy/mantis/internal/contract/activityio"
	"github.com/mantis-deploy/mantis/internal/contract/spec"
	"github.com/mantis-deploy/mantis/internal/domain"
	"github.com/mantis-deploy/mantis/internal/testrig/testenv"
	"github.com/mantis-deploy/mantis/schema"
)

// A deployment started straight from a Temporal client whose selector matches more
// than spec.MaxTargets targets is refused for good, naming the count, and recorded
// failed.
func TestStartDeploymentRefusesMoreThanMaxTargets(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := testenv.MigratedPool(t)
	_, err := pool.Exec(ctx, `INSERT INTO targets (name, mode, labels)
		SELECT 'web-' || i, 'poll', '{"role": "web"}'::jsonb FROM generate_series(1, 12345) AS i`)
	require.NoError(t, err)

	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestActivityEnvironment()
	env.RegisterActivity(&activities.Activities{DB: pool})
	var a *activities.Activities
	_, err = env.ExecuteActivity(a.StartDeployment, activityio.StartDeploymentInput{
		WorkflowID: "started-by-hand", CountOnly: true,
		Spec: spec.Deployment{Name: "big", TargetSelector: map[string]string{"role": "web"}, Steps: []spec.Step{{Name: "s", Command: "true"}}},
	})
	var appErr *temporal.ApplicationError
	require.True(t, errors.As(err, &appErr), "got %v", err)
	require.Equal(t, activityio.InvalidSpec, appErr.Type())
	require.True(t, appErr.NonRetryable())
	require.Contains(t, appErr.Error(), "deployment resolves to 12345 targets; at most 10000")

	id, err := activityio.DeploymentIDFor("started-by-hand", spec.Deployment{})
	require.NoError(t, err)
	d, err := schema.GetDeployment(ctx, pool, id)
	require.NoError(t, err)
	require.Equal(t, domain.DeploymentFailed, d.Status)
}

// A start answered with the count only carries no target names.
func TestStartDeploymentCountOnlyCarriesNoNames(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := testenv.MigratedPool(t)
	_, err := pool.Exec(ctx, `INSERT INTO targets (name, mode, labels)
		SELECT 'web-' || i, 'poll', '{"role": "web"}'::jsonb FROM generate_series(1, 300) AS i`)
	require.NoError(t, err)
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestActivityEnvironment()
	env.RegisterActivity(&activities.Activities{DB: pool})
	var a *activities.Activities
	in := activityio.StartDeploymentInput{WorkflowID: "counted", CountOnly: true,
		Spec: spec.Deployment{Name: "counted", TargetSelector: map[string]string{"role": "web"}, Steps: []spec.Step{{Name: "s", Command: "true"}}}}
	for range 2 { // a retry answers the same
		v, err := env.ExecuteActivity(a.StartDeployment, in)
		require.NoError(t, err)
		var res activityio.StartDeploymentResult
		require.NoError(t, v.Get(&res))
		require.Empty(t, res.Targets)
		require.Equal(t, 300, res.TargetCount)
	}
}
