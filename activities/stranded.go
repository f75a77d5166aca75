package activities

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/mantis-deploy/mantis/internal/domain"
	"github.com/mantis-deploy/mantis/schema"
)

// StrandedDeploymentAge is how long a deployment may stay pending without a workflow
// before the maintenance fails it. The API stores a deployment, then starts its
// workflow; when the start fails (Temporal unreachable) the client is answered 500 and
// may retry with the same idempotency key, which starts it. A client that gave up
// would leave the row pending for good.
const StrandedDeploymentAge = 15 * time.Minute

// strandedPerRound bounds the deployments one maintenance round looks up in Temporal.
const strandedPerRound = 20

// StrandedReason is the reason recorded on a deployment failed because its workflow
// never started.
const StrandedReason = "never started: its workflow could not be started when it was created; create it again"

// DeploymentWorkflows answers whether a deployment's workflow exists in Temporal. The
// workflows package names the workflow; Mandible's Temporal client looks it up.
type DeploymentWorkflows interface {
	// Started reports whether the workflow of deployment id was ever started.
	Started(ctx context.Context, id uuid.UUID) (bool, error)
}

// failStrandedDeployments fails the deployments pending for over
// StrandedDeploymentAge whose workflow Temporal has never heard of, and returns them.
// One whose workflow exists (started late, or queued behind others) is left alone:
// the workflow records it.
func (a *Activities) failStrandedDeployments(ctx context.Context) ([]uuid.UUID, error) {
	if a.Deployments == nil {
		return nil, nil
	}
	ids, err := schema.PendingDeploymentsCreatedBefore(ctx, a.DB, StrandedDeploymentAge, strandedPerRound)
	if err != nil {
		return nil, err
	}
	var failed []uuid.UUID
	var errs []error
	for _, id := range ids {
		started, err := a.Deployments.Started(ctx, id)
		if err != nil {
			errs = append(errs, fmt.Errorf("looking up the workflow of deployment %s: %w", id, err))
			continue
		}
		if started {
			continue
		}
		final, err := schema.FinishDeployment(ctx, a.DB, id, domain.DeploymentFailed, StrandedReason)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if final == domain.DeploymentFailed {
			a.Logger.WarnContext(ctx, "failed deployment whose workflow never started", "deployment_id", id,
				"pending_for_over", StrandedDeploymentAge)
			failed = append(failed, id)
		}
	}
	return failed, errors.Join(errs...)
}
