package activities

import (
	"context"
	"errors"

	"go.temporal.io/sdk/temporal"

	"github.com/mantis-deploy/mantis/internal/contract/activityio"
	"github.com/mantis-deploy/mantis/internal/contract/api"
	"github.com/mantis-deploy/mantis/internal/domain"
	"github.com/mantis-deploy/mantis/schema"
)

// RecordDecision stores a decision in deployment_decisions with its event, and clears
// what the deployment waited for (schema.RecordDecision).
func (a *Activities) RecordDecision(ctx context.Context, in activityio.RecordDecisionInput) (api.Decision, error) {
	id, err := deploymentID(in.DeploymentID)
	if err != nil {
		return api.Decision{}, err
	}
	return schema.RecordDecision(ctx, a.DB, schema.NewDecision{
		DeploymentID: id, Decision: in.Decision, By: in.By, Comment: in.Comment, Step: in.Step, At: in.At, UpdateID: in.UpdateID,
	})
}

// SetWaiting records what a deployment waits for, with a deployment.waiting event
// (schema.SetWaiting), for the API's deployment view and SSE clients.
func (a *Activities) SetWaiting(ctx context.Context, in activityio.SetWaitingInput) error {
	id, err := deploymentID(in.DeploymentID)
	if err != nil {
		return err
	}
	return schema.SetWaiting(ctx, a.DB, id, in.Waiting)
}

// RetryStep sets the step running again: the requests of its failed targets are
// superseded, and the next AdvanceStep enqueues those targets as new requests
// (schema.RetryStep). It returns how many targets run again.
//
// Runs from before the "struct-activity-io" change schedule it; newer runs
// schedule RetryStepRound.
func (a *Activities) RetryStep(ctx context.Context, in activityio.RetryStepInput) (int, error) {
	id, err := deploymentID(in.DeploymentID)
	if err != nil {
		return 0, err
	}
	if in.Round < 1 {
		return 0, temporal.NewNonRetryableApplicationError("round: must be 1 or more", activityio.InvalidSpec, nil)
	}
	n, err := schema.RetryStep(ctx, a.DB, id, in.Position, in.Round)
	var inputErr *domain.InputError
	if errors.As(err, &inputErr) {
		return 0, temporal.NewNonRetryableApplicationError(inputErr.Error(), activityio.InvalidSpec, nil)
	}
	return n, err
}
