package workflows_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/config"
	"github.com/mantis-deploy/mantis/internal/contract/activityio"
	"github.com/mantis-deploy/mantis/workflows"
)

// TestDefaultDeploymentTaskQueueIsTheConfigDefault holds Mandible's configured default
// deployment task queue to the name the workflows document, which a
// `temporal workflow start` uses.
func TestDefaultDeploymentTaskQueueIsTheConfigDefault(t *testing.T) {
	t.Parallel()
	require.Equal(t, workflows.DefaultDeploymentTaskQueue, config.DefaultMandible().Temporal.DeploymentTaskQueue)
}

// TestDeploymentWorkflowIDRoundTrips checks that StartDeployment reads back the
// deployment id Mandible put in the workflow id.
func TestDeploymentWorkflowIDRoundTrips(t *testing.T) {
	t.Parallel()
	const id = "0b5b7c1e-8d6e-4a55-9a51-2f1d3c4b5a69"
	got, err := activityio.DeploymentIDFor(workflows.DeploymentWorkflowID(id), workflows.DeploymentInput{}.Deployment)
	require.NoError(t, err)
	require.Equal(t, id, got.String())
}
