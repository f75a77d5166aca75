package workflows

import (
	"fmt"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/mantis-deploy/mantis/internal/contract/activityio"
	"github.com/mantis-deploy/mantis/internal/contract/spec"
	"github.com/mantis-deploy/mantis/internal/domain"
)

// cancelledReason is the reason recorded for a deployment whose workflow was cancelled.
const cancelledReason = "cancelled"

// upsertDeploymentStarted sets the search attributes of a deployment that started.
func upsertDeploymentStarted(ctx workflow.Context, deploymentID string, s spec.Deployment) {
	_ = workflow.UpsertTypedSearchAttributes(ctx,
		DeploymentIDSearchAttribute.ValueSet(deploymentID),
		DeploymentNameSearchAttribute.ValueSet(s.Name),
		DeploymentPrioritySearchAttribute.ValueSet(s.Priority),
		DeploymentStatusSearchAttribute.ValueSet(domain.DeploymentRunning))
}

// interruptedStatus is the deployment's status and reason when step ended with err:
// cancelled when the workflow was, failed otherwise.
func interruptedStatus(ctx workflow.Context, step spec.Step, err error) (status, reason string) {
	if temporal.IsCanceledError(err) || ctx.Err() != nil {
		return domain.DeploymentCancelled, cancelledReason
	}
	return domain.DeploymentFailed, fmt.Sprintf("step %s: %v", step.Name, err)
}

// stopsDeployment reports whether a step that ended as sr stops the deployment, and
// with which reason.
func stopsDeployment(step spec.Step, sr StepResult) (bool, string) {
	if sr.Status != domain.StepFailed || step.ContinueOnError {
		return false, ""
	}
	return true, fmt.Sprintf("step %s failed on %d of %d targets", step.Name, sr.Failed, sr.Succeeded+sr.Failed+sr.Skipped)
}

// cancelDeploymentWork stops what an interrupted step left outstanding.
func cancelDeploymentWork(endCtx workflow.Context, deploymentID string) {
	if err := cancelWork(endCtx, deploymentID); err != nil {
		workflow.GetLogger(endCtx).Error("cancelling deployment work failed", "err", err)
	}
}

// finishInterruptedStep records the end of the step at pos that an error or a cancel
// interrupted, and returns its summary with that end.
func finishInterruptedStep(endCtx workflow.Context, deploymentID string, pos int, sr StepResult, deploymentStatus string) StepResult {
	sr.Status = domain.StepFailed
	if deploymentStatus == domain.DeploymentCancelled {
		sr.Status = domain.StepCancelled
	}
	if err := workflow.ExecuteActivity(endCtx, activityio.FinishStep, activityio.FinishStepInput{
		StepInput: activityio.StepInput{DeploymentID: deploymentID, Position: pos}, Status: sr.Status,
		Succeeded: sr.Succeeded, Failed: sr.Failed, Skipped: sr.Skipped}).Get(endCtx, nil); err != nil {
		workflow.GetLogger(endCtx).Error("finishing interrupted step failed", "step", sr.Name, "err", err)
	}
	return sr
}

// finishDeployment records the deployment's end and returns the workflow's outcome:
// no error when it succeeded, a cancelled error when it was cancelled, and a
// non-retryable DeploymentFailed error carrying the result otherwise.
func finishDeployment(endCtx workflow.Context, result DeploymentResult, status, reason string) (DeploymentResult, error) {
	final, err := endDeployment(endCtx, activityio.FinishDeploymentInput{DeploymentID: result.DeploymentID, Status: status, Reason: reason})
	if err != nil {
		return result, err
	}
	result.Status = final
	_ = workflow.UpsertTypedSearchAttributes(endCtx, DeploymentStatusSearchAttribute.ValueSet(final))
	switch final {
	case domain.DeploymentSucceeded:
		return result, nil
	case domain.DeploymentCancelled:
		return result, temporal.NewCanceledError(reason)
	default:
		if reason == "" {
			reason = "the deployment failed"
		}
		return result, temporal.NewNonRetryableApplicationError(reason, activityio.DeploymentFailed, nil, result)
	}
}
