package httpapi_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/contract/api"
)

// A dry run answers with the targets in each step's batches, the offline targets,
// the freezes that would refuse it and the limits over its targets, and writes no
// row and starts no workflow.
func TestDryRunPlansAndChangesNothing(t *testing.T) {
	t.Parallel()
	b := setupFleet(t)
	b.registerTargets(t, map[string]string{"web-1": "prod", "web-2": "prod", "web-3": "prod", "web-4": "prod", "db-1": "stage"})
	ctx := context.Background()
	// web-1 is served by a live Thorax; the others by none.
	_, err := b.pool.Exec(ctx, `WITH i AS (INSERT INTO thorax_instances (id, name) VALUES (gen_random_uuid(), 'thorax-a') RETURNING id)
		UPDATE targets SET assigned_instance_id = (SELECT id FROM i) WHERE name = 'web-1'`)
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, b.call(t, "POST", "/api/v1/freezes", fleetAdmin,
		`{"name":"stage-freeze","reason":"migration","selector":{"env":"stage"}}`, nil))
	before := map[string]int{}
	for _, table := range []string{"deployments", "deployment_events", "deployment_steps", "pending_dispatch_requests"} {
		before[table] = b.count(t, table)
	}
	spec := `{"name":"ship","target_selector":{"env":"prod"},"targets":["db-1"],
		"rollout":{"batches":[1,"50%"]},
		"steps":[{"name":"build","command":"make"},{"name":"switch","command":"ln -s","rollout":{"batches":[2]}}]}`
	var plan api.DeploymentPlan
	require.Equal(t, http.StatusOK, b.call(t, "POST", "/api/v1/deployments?dry_run=true", fleetDeploy, spec, &plan))
	require.Equal(t, []string{"db-1", "web-1", "web-2", "web-3", "web-4"}, plan.Targets)
	require.Equal(t, []string{"db-1", "web-2", "web-3", "web-4"}, plan.Offline)
	require.Len(t, plan.Steps, 2)
	require.Equal(t, [][]string{{"db-1"}, {"web-1", "web-2"}, {"web-3", "web-4"}}, plan.Steps[0].Batches)
	require.Equal(t, [][]string{{"db-1", "web-1"}, {"web-2", "web-3"}, {"web-4"}}, plan.Steps[1].Batches)
	require.Equal(t, []api.BlockingFreeze{{Name: "stage-freeze", Reason: "migration", Targets: 1, FirstTarget: "db-1"}}, plan.Freezes)
	require.Contains(t, plan.Limits, api.PlanLimit{Name: "target-default", MaxRunning: 1, Targets: 5})

	for table, n := range before {
		require.Equal(t, n, b.count(t, table), "%s is unchanged", table)
	}
	require.Zero(t, b.temporal.started.Load(), "no workflow is started")
	require.Equal(t, http.StatusBadRequest, b.call(t, "POST", "/api/v1/deployments?dry_run=maybe", fleetDeploy, spec, nil))
}

// A deployment with a rollout and rollback steps is created like any other, and its
// workflow, which carries them out, is started.
func TestCreateAcceptsRollouts(t *testing.T) {
	t.Parallel()
	b := setupFleet(t)
	b.registerTargets(t, map[string]string{"web-1": "prod", "web-2": "prod"})
	spec := `{"name":"ship","target_selector":{"env":"prod"},"rollout":{"batches":[1],"max_failures":1},
		"steps":[{"name":"a","command":"true","rollout":{"batches":[1],"canary":{"verify":"true"}}}],
		"on_failure":[{"name":"undo","command":"./rollback.sh"}]}`
	var created api.CreatedDeployment
	require.Equal(t, http.StatusAccepted, b.call(t, "POST", "/api/v1/deployments", fleetDeploy, spec, &created))
	require.Equal(t, int64(1), b.temporal.started.Load(), "its workflow is started")
}
