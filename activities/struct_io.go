package activities

import (
	"context"

	"github.com/mantis-deploy/mantis/internal/contract/activityio"
)

// The activities below take and return structs (activityio's CancelDeployment,
// RetryStepRound, EndDeployment, CountTouchedTargets). The older names with bare
// values do the same work and stay registered for the runs that scheduled them.

// CancelDeployment cancels what a cancelled deployment has not finished.
func (a *Activities) CancelDeployment(ctx context.Context, in activityio.CancelDeploymentInput) (activityio.CancelDeploymentResult, error) {
	n, err := a.CancelDeploymentWork(ctx, in.DeploymentID)
	return activityio.CancelDeploymentResult{Cancelled: n}, err
}

// RetryStepRound sets the step running again on its failed targets (RetryStep).
func (a *Activities) RetryStepRound(ctx context.Context, in activityio.RetryStepInput) (activityio.RetryStepRoundResult, error) {
	n, err := a.RetryStep(ctx, in)
	return activityio.RetryStepRoundResult{Targets: n}, err
}

// EndDeployment records the deployment's end and returns its final state
// (FinishDeployment).
func (a *Activities) EndDeployment(ctx context.Context, in activityio.FinishDeploymentInput) (activityio.EndDeploymentResult, error) {
	final, err := a.FinishDeployment(ctx, in)
	return activityio.EndDeploymentResult{Status: final}, err
}

// CountTouchedTargets counts the targets the deployment's steps reached
// (TouchedTargets).
func (a *Activities) CountTouchedTargets(ctx context.Context, in activityio.TouchedTargetsInput) (activityio.CountTouchedTargetsResult, error) {
	n, err := a.TouchedTargets(ctx, in)
	return activityio.CountTouchedTargetsResult{Targets: n}, err
}
