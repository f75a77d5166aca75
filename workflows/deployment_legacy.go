package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/mantis-deploy/mantis/activities"
	"github.com/mantis-deploy/mantis/internal/spec"
	"github.com/mantis-deploy/mantis/schema"
)

// awaitMaxWait bounds one AwaitStepResults call; the workflow simply calls again.
const awaitMaxWait = 30 * time.Second

// legacyDeployment is the Deployment workflow as it ran before windowInDatabaseChange:
// runs recorded by it replay through it, unchanged. For each step it enqueues the targets' dispatch requests (at most max_parallel at a
// time) and waits for their results, which reach it in batches. A failed step stops
// the deployment unless continue_on_error. Cancelling the workflow cancels what has
// not finished and ends the deployment cancelled.
func legacyDeployment(ctx workflow.Context, in spec.Deployment) (DeploymentResult, error) {
	logger := workflow.GetLogger(ctx)
	var a *activities.Activities
	retry := deploymentRetry()
	short := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute, RetryPolicy: retry})

	s := in.WithDefaults()
	// Recording the deployment finishes even if a cancel arrives meanwhile, so that a
	// cancelled deployment is recorded as cancelled rather than left running.
	startCtx, _ := workflow.NewDisconnectedContext(workflow.WithActivityOptions(short, workflow.ActivityOptions{
		StartToCloseTimeout: time.Minute, RetryPolicy: retry,
		Summary: fmt.Sprintf("record deployment %s and resolve its targets", s.Name)}))
	var started activities.StartDeploymentResult
	if err := workflow.ExecuteActivity(startCtx, a.StartDeployment,
		activities.StartDeploymentInput{WorkflowID: workflow.GetInfo(ctx).WorkflowExecution.ID, Spec: in},
	).Get(startCtx, &started); err != nil {
		return DeploymentResult{}, err
	}
	result := DeploymentResult{DeploymentID: started.DeploymentID, Status: schema.DeploymentRunning}
	_ = workflow.UpsertTypedSearchAttributes(ctx,
		DeploymentIDSearchAttribute.ValueSet(started.DeploymentID),
		DeploymentNameSearchAttribute.ValueSet(s.Name),
		DeploymentPrioritySearchAttribute.ValueSet(s.Priority),
		DeploymentStatusSearchAttribute.ValueSet(schema.DeploymentRunning))

	status, reason := schema.DeploymentSucceeded, ""
	var stepErr error
	for i, step := range s.Steps {
		if ctx.Err() != nil {
			status, reason = schema.DeploymentCancelled, "cancelled"
			break
		}
		sr, err := legacyRunStep(ctx, started, s, i, step)
		result.Steps = append(result.Steps, sr)
		if err != nil {
			stepErr = err
			if temporal.IsCanceledError(err) || ctx.Err() != nil {
				status, reason = schema.DeploymentCancelled, "cancelled"
			} else {
				status, reason = schema.DeploymentFailed, fmt.Sprintf("step %s: %v", step.Name, err)
			}
			break
		}
		if sr.Status == "failed" && !step.ContinueOnError {
			status, reason = schema.DeploymentFailed, fmt.Sprintf("step %s failed on %d of %d targets", step.Name, sr.Failed, sr.Succeeded+sr.Failed+sr.Skipped)
			break
		}
	}

	// Ending runs even when the workflow was cancelled.
	endCtx, _ := workflow.NewDisconnectedContext(short)
	if stepErr != nil || status == schema.DeploymentCancelled {
		// Stop what the interrupted step left outstanding.
		var n int
		if err := workflow.ExecuteActivity(endCtx, a.CancelDeploymentWork, started.DeploymentID).Get(endCtx, &n); err != nil {
			logger.Error("cancelling deployment work failed", "error", err)
		}
	}
	if stepErr != nil {
		k := len(result.Steps) - 1
		end := "failed"
		if status == schema.DeploymentCancelled {
			end = "cancelled"
		}
		sr := &result.Steps[k]
		sr.Status = end
		if err := workflow.ExecuteActivity(endCtx, a.FinishStep, activities.FinishStepInput{
			StepInput: activities.StepInput{DeploymentID: started.DeploymentID, Position: k}, Status: end,
			Succeeded: sr.Succeeded, Failed: sr.Failed, Skipped: sr.Skipped}).Get(endCtx, nil); err != nil {
			logger.Error("finishing interrupted step failed", "step", sr.Name, "error", err)
		}
	}
	// Steps that never ran are skipped.
	for i := len(result.Steps); i < len(s.Steps); i++ {
		result.Steps = append(result.Steps, StepResult{Name: s.Steps[i].Name, Status: "skipped", Skipped: len(started.Targets)})
		if err := workflow.ExecuteActivity(endCtx, a.FinishStep, activities.FinishStepInput{
			StepInput: activities.StepInput{DeploymentID: started.DeploymentID, Position: i}, Status: "skipped",
			Skipped: len(started.Targets)}).Get(endCtx, nil); err != nil {
			logger.Error("skipping step failed", "step", s.Steps[i].Name, "error", err)
		}
	}
	var final string
	if err := workflow.ExecuteActivity(endCtx, a.FinishDeployment, activities.FinishDeploymentInput{
		DeploymentID: started.DeploymentID, Status: status, Reason: reason}).Get(endCtx, &final); err != nil {
		return result, err
	}
	result.Status = final
	_ = workflow.UpsertTypedSearchAttributes(endCtx, DeploymentStatusSearchAttribute.ValueSet(final))
	switch final {
	case schema.DeploymentSucceeded:
		return result, nil
	case schema.DeploymentCancelled:
		return result, temporal.NewCanceledError(reason)
	default:
		if reason == "" {
			reason = "the deployment failed"
		}
		return result, temporal.NewNonRetryableApplicationError(reason, DeploymentFailed, nil, result)
	}
}

// legacyRunStep runs one step on every target, at most MaxParallel at a time, and returns
// its summary, shipping the waited-for targets to every AwaitStepResults call. A failure on some target does not stop the targets already running,
// but no further ones start unless the step continues on error.
func legacyRunStep(ctx workflow.Context, d activities.StartDeploymentResult, s spec.Deployment, pos int, step spec.Step) (StepResult, error) {
	var a *activities.Activities
	sr := StepResult{Name: step.Name}
	retry := deploymentRetry()
	opts := func(summary string) workflow.Context {
		return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute, RetryPolicy: retry, Summary: summary})
	}
	stepIn := activities.StepInput{DeploymentID: d.DeploymentID, Position: pos}
	targets := d.Targets
	if err := workflow.ExecuteActivity(opts(fmt.Sprintf("start step %d %s on %d targets", pos, step.Name, len(targets))),
		a.StartStep, activities.StartStepInput{StepInput: stepIn, Targets: len(targets)}).Get(ctx, nil); err != nil {
		sr.Skipped = len(targets)
		return sr, err
	}
	window := len(targets)
	if s.MaxParallel > 0 && s.MaxParallel < window {
		window = s.MaxParallel
	}
	next := 0
	waiting := map[string]bool{}
	enqueue := func(n int) error {
		batch := targets[next:min(next+n, len(targets))]
		if len(batch) == 0 {
			return nil
		}
		next += len(batch)
		for _, t := range batch {
			waiting[t] = true
		}
		return workflow.ExecuteActivity(opts(fmt.Sprintf("enqueue step %s for %d targets", step.Name, len(batch))),
			a.EnqueueStepTargets, activities.EnqueueStepTargetsInput{StepInput: stepIn, Priority: s.Priority, Step: step, Targets: batch}).Get(ctx, nil)
	}
	if err := enqueue(window); err != nil {
		sr.Skipped = len(targets) - next
		return sr, err
	}
	for len(waiting) > 0 {
		names := make([]string, 0, len(waiting))
		for _, t := range targets { // in target order: deterministic
			if waiting[t] {
				names = append(names, t)
			}
		}
		var got activities.AwaitStepResultsResult
		awaitCtx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
			StartToCloseTimeout: awaitMaxWait + 30*time.Second, HeartbeatTimeout: 10 * time.Second, RetryPolicy: retry,
			Summary: fmt.Sprintf("await step %s: %d of %d targets running", step.Name, len(names), len(targets)),
		})
		if err := workflow.ExecuteActivity(awaitCtx, a.AwaitStepResults, activities.AwaitStepResultsInput{
			StepInput: stepIn, Waiting: names, MaxWait: awaitMaxWait}).Get(ctx, &got); err != nil {
			sr.Skipped = len(targets) - next
			return sr, err
		}
		ended := 0
		for _, r := range got.Results {
			if !waiting[r.Target] {
				continue
			}
			delete(waiting, r.Target)
			ended++
			if r.Status == "succeeded" {
				sr.Succeeded++
			} else {
				sr.Failed++
				if len(sr.FailedTargets) < 20 {
					sr.FailedTargets = append(sr.FailedTargets, r)
				}
			}
		}
		if sr.Failed == 0 || step.ContinueOnError {
			if err := enqueue(ended); err != nil {
				sr.Skipped = len(targets) - next
				return sr, err
			}
		}
	}
	sr.Skipped = len(targets) - next
	sr.Status = "succeeded"
	if sr.Failed > 0 {
		sr.Status = "failed"
	}
	if err := workflow.ExecuteActivity(opts(fmt.Sprintf("finish step %s: %s", step.Name, sr.Status)), a.FinishStep, activities.FinishStepInput{
		StepInput: stepIn, Status: sr.Status, Succeeded: sr.Succeeded, Failed: sr.Failed, Skipped: sr.Skipped}).Get(ctx, nil); err != nil {
		return sr, err
	}
	return sr, nil
}
