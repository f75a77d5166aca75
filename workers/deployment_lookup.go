package workers

import (
	"context"
	"errors"

	"github.com/google/uuid"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/mantis-deploy/mantis/workflows"
)

// DeploymentLookup finds deployments' workflows through Mandible's Temporal client
// (activities.DeploymentWorkflows).
type DeploymentLookup struct {
	Client client.Client
}

// Started reports whether deployment id's workflow exists, running or closed.
func (l DeploymentLookup) Started(ctx context.Context, id uuid.UUID) (bool, error) {
	_, err := l.Client.DescribeWorkflow(ctx, workflows.DeploymentWorkflowID(id.String()), "")
	var notFound *serviceerror.NotFound
	switch {
	case errors.As(err, &notFound):
		return false, nil
	case err != nil:
		return false, err
	}
	return true, nil
}
