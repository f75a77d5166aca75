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
	"github.com/mantis-deploy/mantis/internal/mandible/freeze"
	"github.com/mantis-deploy/mantis/internal/testrig/testenv"
	"github.com/mantis-deploy/mantis/schema"
)

// A deployment started straight from a Temporal client (a schedule, the temporal
// CLI) onto a frozen target is refused for good, naming the freeze, and recorded
// failed; one on a target the freeze does not match starts.
func TestStartDeploymentRefusesFrozenTargets(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := testenv.MigratedPool(t)
	_, err := pool.Exec(ctx, `INSERT INTO targets (name, mode, labels) VALUES
		('prod-1', 'poll', '{"env": "prod"}'), ('stage-1', 'poll', '{"env": "stage"}')`)
	require.NoError(t, err)
	_, err = schema.CreateFreeze(ctx, pool, freeze.Definition{Name: "prod-freeze", Reason: "quarter close",
		Selector: map[string]string{"env": "prod"}}, "ops")
	require.NoError(t, err)

	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestActivityEnvironment()
	env.RegisterActivity(&activities.Activities{DB: pool})
	var a *activities.Activities
	start := func(workflowID, target string) error {
		_, err := env.ExecuteActivity(a.StartDeployment, activityio.StartDeploymentInput{WorkflowID: workflowID,
			Spec: spec.Deployment{Name: "d", Targets: []string{target}, Steps: []spec.Step{{Name: "s", Command: "true"}}}})
		return err
	}
	err = start("frozen-by-hand", "prod-1")
	var appErr *temporal.ApplicationError
	require.True(t, errors.As(err, &appErr), "got %v", err)
	require.Equal(t, activities.Frozen, appErr.Type())
	require.True(t, appErr.NonRetryable())
	require.Contains(t, appErr.Error(), `"prod-freeze" (quarter close)`)
	id, err := activityio.DeploymentIDFor("frozen-by-hand", spec.Deployment{})
	require.NoError(t, err)
	d, err := schema.GetDeployment(ctx, pool, id)
	require.NoError(t, err)
	require.Equal(t, domain.DeploymentFailed, d.Status)

	require.NoError(t, start("unfrozen-by-hand", "stage-1"))
}
