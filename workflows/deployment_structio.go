package workflows

import (
	"go.temporal.io/sdk/workflow"

	"github.com/mantis-deploy/mantis/internal/contract/activityio"
)

// structActivityIOChange is the workflow.GetVersion change id of the runs that
// schedule CancelDeployment, RetryStepRound, EndDeployment and CountTouchedTargets,
// whose inputs and results are structs, instead of CancelDeploymentWork, RetryStep,
// FinishDeployment and TouchedTargets, which took or returned bare values. One change
// id for the four: a run records it at the first of them it reaches.
const structActivityIOChange = "struct-activity-io"

// structActivityIOVersion is the version of structActivityIOChange new runs take.
const structActivityIOVersion = 1

// structActivityIO reports whether this run schedules the struct activities.
func structActivityIO(ctx workflow.Context) bool {
	return workflow.GetVersion(ctx, structActivityIOChange, workflow.DefaultVersion, structActivityIOVersion) != workflow.DefaultVersion
}

// cancelWork runs CancelDeployment, or CancelDeploymentWork in a run from before
// structActivityIOChange.
func cancelWork(ctx workflow.Context, deploymentID string) error {
	if !structActivityIO(ctx) {
		var n int
		return workflow.ExecuteActivity(ctx, activityio.CancelDeploymentWork, deploymentID).Get(ctx, &n)
	}
	var r activityio.CancelDeploymentResult
	return workflow.ExecuteActivity(ctx, activityio.CancelDeployment, activityio.CancelDeploymentInput{DeploymentID: deploymentID}).Get(ctx, &r)
}

// retryRound runs RetryStepRound, or RetryStep in a run from before
// structActivityIOChange.
func retryRound(ctx workflow.Context, in activityio.RetryStepInput) error {
	if !structActivityIO(ctx) {
		var n int
		return workflow.ExecuteActivity(ctx, activityio.RetryStep, in).Get(ctx, &n)
	}
	var r activityio.RetryStepRoundResult
	return workflow.ExecuteActivity(ctx, activityio.RetryStepRound, in).Get(ctx, &r)
}

// endDeployment runs EndDeployment, or FinishDeployment in a run from before
// structActivityIOChange, and returns the deployment's final state.
func endDeployment(ctx workflow.Context, in activityio.FinishDeploymentInput) (string, error) {
	if !structActivityIO(ctx) {
		var final string
		err := workflow.ExecuteActivity(ctx, activityio.FinishDeployment, in).Get(ctx, &final)
		return final, err
	}
	var r activityio.EndDeploymentResult
	err := workflow.ExecuteActivity(ctx, activityio.EndDeployment, in).Get(ctx, &r)
	return r.Status, err
}

// countTouched runs CountTouchedTargets, or TouchedTargets in a run from before
// structActivityIOChange.
func countTouched(ctx workflow.Context, in activityio.TouchedTargetsInput) (int, error) {
	if !structActivityIO(ctx) {
		var n int
		err := workflow.ExecuteActivity(ctx, activityio.TouchedTargets, in).Get(ctx, &n)
		return n, err
	}
	var r activityio.CountTouchedTargetsResult
	err := workflow.ExecuteActivity(ctx, activityio.CountTouchedTargets, in).Get(ctx, &r)
	return r.Targets, err
}
