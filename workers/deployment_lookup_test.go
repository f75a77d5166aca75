package workers

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/mantis-deploy/mantis/internal/testrig/testenv"
	"github.com/mantis-deploy/mantis/workflows"
)

// The lookup tells a deployment whose workflow was never started from one whose
// workflow exists, on the real server, whatever the workflow's state.
func TestDeploymentLookupFindsOnlyStartedWorkflows(t *testing.T) {
	t.Parallel()
	srv := testenv.TemporalServer(t)
	c, err := client.Dial(client.Options{HostPort: srv.Address, Namespace: srv.Namespace})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	ctx := context.Background()
	lookup := DeploymentLookup{Client: c}

	id := uuid.Must(uuid.NewV7())
	started, err := lookup.Started(ctx, id)
	require.NoError(t, err)
	require.False(t, started, "no workflow was started for this deployment")

	// No worker polls this task queue: the workflow exists but never runs, as one
	// queued behind others would.
	_, err = c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: workflows.DeploymentWorkflowID(id.String()), TaskQueue: srv.TaskQueue},
		workflows.DeploymentWorkflowType, map[string]any{"name": "d"})
	require.NoError(t, err)
	started, err = lookup.Started(ctx, id)
	require.NoError(t, err)
	require.True(t, started)
	require.NoError(t, c.TerminateWorkflow(ctx, workflows.DeploymentWorkflowID(id.String()), "", "test ended"))
	started, err = lookup.Started(ctx, id)
	require.NoError(t, err)
	require.True(t, started, "a closed workflow was started too")

	c.Close()
	_, err = lookup.Started(ctx, uuid.Must(uuid.NewV7()))
	require.Error(t, err, "a failed look-up is an error, never taken for a workflow that does not exist")
}
