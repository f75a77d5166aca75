package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/mantis-deploy/mantis/internal/contract/activityio"
	"github.com/mantis-deploy/mantis/internal/contract/spec"
	"github.com/mantis-deploy/mantis/internal/domain"
)

// awaitMaxWait bounds one AwaitStepResults call; the workflow simply calls again.
const awaitMaxWait = 30 * time.Second

// legacyDeployment is the Deployment workflow as it ran before windowInDatabaseChange:
// runs recorded by it replay through it, unchanged. For each step it enqueues the
// targets' dispatch requests (at most max_parallel at a time) and waits for their
// results, which reach it in batches. A failed step stops the deployment unless
// continue_on_error. Cancelling the workflow cancels what has not finished and ends the
// deployment cancelled.
func legacyDeployment(ctx workflow.Context, in spec.Deployment) (DeploymentResult, error) {
	retry := deploymentRetry()
	short := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute, RetryPolicy: retry})

	s := in.WithDefaults()
	// Recording the deployment finishes even if a cancel arrives meanwhile, so that a
	// cancelled deployment is recorded as cancelled rather than left running.
	startCtx, _ := workflow.NewDisconnectedContext(workflow.WithActivityOptions(short, workflow.ActivityOptions{
		StartToCloseTimeout: time.Minute, RetryPolicy: retry,
		Summary: fmt.Sprintf("record deployment %s and resolve its targets", s.Name)}))
	var started activityio.StartDeploymentResult
	if err := workflow.ExecuteActivity(startCtx, activityio.StartDeployment,
		activityio.StartDeploymentInput{WorkflowID: workflow.GetInfo(ctx).WorkflowExecution.ID, Spec: in},
	).Get(startCtx, &started); err != nil {
		return DeploymentResult{}, err
	}
	result := DeploymentResult{DeploymentID: started.DeploymentID, Status: domain.DeploymentRunning}
	upsertDeploymentStarted(ctx, started.DeploymentID, s)

	status, reason, stepErr := legacyRunSteps(ctx, started, s, &result)
	// Ending runs even when the workflow was cancelled.
	endCtx, _ := workflow.NewDisconnectedContext(short)
	if stepErr != nil || status == domain.DeploymentCancelled {
		cancelDeploymentWork(endCtx, started.DeploymentID)
	}
	if stepErr != nil {
		k := len(result.Steps) - 1
		result.Steps[k] = finishInterruptedStep(endCtx, started.DeploymentID, k, result.Steps[k], status)
	}
	// Steps that never ran are skipped.
	for i := len(result.Steps); i < len(s.Steps); i++ {
		result.Steps = append(result.Steps, StepResult{Name: s.Steps[i].Name, Status: domain.StepSkipped, Skipped: len(started.Targets)})
		if err := workflow.ExecuteActivity(endCtx, activityio.FinishStep, activityio.FinishStepInput{
			StepInput: activityio.StepInput{DeploymentID: started.DeploymentID, Position: i}, Status: domain.StepSkipped,
			Skipped: len(started.Targets)}).Get(endCtx, nil); err != nil {
			workflow.GetLogger(ctx).Error("skipping step failed", "step", s.Steps[i].Name, "err", err)
		}
	}
	return finishDeployment(endCtx, result, status, reason)
}

// legacyRunSteps runs the deployment's steps in order, appending each step's summary to
// result, until one stops the deployment or the workflow is cancelled. It returns the
// deployment's status and reason, and the error that interrupted a step, if any.
func legacyRunSteps(ctx workflow.Context, started activityio.StartDeploymentResult, s spec.Deployment, result *DeploymentResult) (status, reason string, stepErr error) {
	for i, step := range s.Steps {
		if ctx.Err() != nil {
			return domain.DeploymentCancelled, cancelledReason, nil
		}
		sr, err := legacyRunStep(ctx, started, s, i, step)
		result.Steps = append(result.Steps, sr)
		if err != nil {
			status, reason = interruptedStatus(ctx, step, err)
			return status, reason, err
		}
		if stop, why := stopsDeployment(step, sr); stop {
			return domain.DeploymentFailed, why, nil
		}
	}
	return domain.DeploymentSucceeded, "", nil
}

// legacyRunStep runs one step on every target, at most MaxParallel at a time, and returns
// its summary, shipping the waited-for targets to every AwaitStepResults call. A failure
// on some target does not stop the targets already running, but no further ones start
// unless the step continues on error.
func legacyRunStep(ctx workflow.Context, d activityio.StartDeploymentResult, s spec.Deployment, pos int, step spec.Step) (StepResult, error) {
	sr := StepResult{Name: step.Name}
	retry := deploymentRetry()
	opts := func(summary string) workflow.Context {
		return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute, RetryPolicy: retry, Summary: summary})
	}
	stepIn := activityio.StepInput{DeploymentID: d.DeploymentID, Position: pos}
	targets := d.Targets
	if err := workflow.ExecuteActivity(opts(fmt.Sprintf("start step %d %s on %d targets", pos, step.Name, len(targets))),
		activityio.StartStep, activityio.StartStepInput{StepInput: stepIn, Targets: len(targets)}).Get(ctx, nil); err != nil {
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
			activityio.EnqueueStepTargets, activityio.EnqueueStepTargetsInput{StepInput: stepIn, Priority: s.Priority, Step: step, Targets: batch}).Get(ctx, nil)
	}
	if err := enqueue(window); err != nil {
		sr.Skipped = len(targets) - next
		return sr, err
	}
	for len(waiting) > 0 {
		names := inTargetOrder(targets, waiting)
		var got activityio.AwaitStepResultsResult
		awaitCtx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
			StartToCloseTimeout: awaitMaxWait + 30*time.Second, HeartbeatTimeout: 10 * time.Second, RetryPolicy: retry,
			Summary: fmt.Sprintf("await step %s: %d of %d targets running", step.Name, len(names), len(targets)),
		})
		if err := workflow.ExecuteActivity(awaitCtx, activityio.AwaitStepResults, activityio.AwaitStepResultsInput{
			StepInput: stepIn, Waiting: names, MaxWait: awaitMaxWait}).Get(ctx, &got); err != nil {
			sr.Skipped = len(targets) - next
			return sr, err
		}
		ended := tallyResults(&sr, got.Results, waiting)
		if sr.Failed == 0 || step.ContinueOnError {
			if err := enqueue(ended); err != nil {
				sr.Skipped = len(targets) - next
				return sr, err
			}
		}
	}
	sr.Skipped = len(targets) - next
	sr.Status = domain.StepSucceeded
	if sr.Failed > 0 {
		sr.Status = domain.StepFailed
	}
	if err := workflow.ExecuteActivity(opts(fmt.Sprintf("finish step %s: %s", step.Name, sr.Status)), activityio.FinishStep, activityio.FinishStepInput{
		StepInput: stepIn, Status: sr.Status, Succeeded: sr.Succeeded, Failed: sr.Failed, Skipped: sr.Skipped}).Get(ctx, nil); err != nil {
		return sr, err
	}
	return sr, nil
}

// inTargetOrder lists the waited-for targets in target order: deterministic, unlike
// iterating the map.
func inTargetOrder(targets []string, waiting map[string]bool) []string {
	names := make([]string, 0, len(waiting))
	for _, t := range targets {
		if waiting[t] {
			names = append(names, t)
		}
	}
	return names
}

// tallyResults counts the results of waited-for targets into sr, removes those
// targets from waiting, and returns how many ended.
func tallyResults(sr *StepResult, results []domain.TargetResult, waiting map[string]bool) int {
	ended := 0
	for _, r := range results {
		if !waiting[r.Target] {
			continue
		}
		delete(waiting, r.Target)
		ended++
		if r.Status == domain.CommandSucceeded {
			sr.Succeeded++
			continue
		}
		sr.Failed++
		if len(sr.FailedTargets) < maxFailedTargets {
			sr.FailedTargets = append(sr.FailedTargets, r)
		}
	}
	return ended
}
