package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/mantis-deploy/mantis/internal/contract/activityio"
	"github.com/mantis-deploy/mantis/internal/contract/api"
	"github.com/mantis-deploy/mantis/internal/contract/events"
	"github.com/mantis-deploy/mantis/internal/contract/spec"
	"github.com/mantis-deploy/mantis/internal/domain"
)

// stepEnd is how a step's end bears on the deployment: whether it stops it, and why.
type stepEnd struct {
	stop   bool
	reason string
}

// decisionsEnabled reports whether this run takes the paths that wait for a person;
// a history recorded before them replays without.
func decisionsEnabled(ctx workflow.Context) bool {
	return workflow.GetVersion(ctx, humanDecisionsChange, workflow.DefaultVersion, humanDecisionsVersion) != workflow.DefaultVersion
}

// runStep runs the step at p.Step: an approval waits for its decision; a command step
// runs on its targets and, when it fails and asks, waits for retry, skip or abort.
func (d *deciding) runStep(ctx workflow.Context, step spec.Step, budget *runBudget) (StepResult, stepEnd, error) {
	if step.IsApproval() && decisionsEnabled(ctx) {
		return d.runApproval(ctx, step)
	}
	// A rollout is never in a history recorded before rollouts, so only a deployment
	// with one asks for the rollout version.
	if r := d.spec.RolloutOf(step); r != nil && rolloutsEnabled(ctx) {
		return d.runRollout(ctx, step, *r, budget)
	}
	for {
		sr, err := runWindowedStep(ctx, d.p, step, budget, d)
		if err != nil {
			return sr, stepEnd{}, err
		}
		stop, why := stopsDeployment(step, sr)
		if !stop || !step.AsksOnFailure() || !decisionsEnabled(ctx) {
			return sr, stepEnd{stop: stop, reason: why}, nil
		}
		got, err := d.await(ctx, Wait{Kind: events.WaitOnFailure, Step: d.p.Step, Approvers: step.Approvers}, step)
		if err != nil {
			return sr, stepEnd{}, err
		}
		switch got.Decision {
		case api.DecisionSkip:
			return sr, stepEnd{}, nil
		case api.DecisionAbort:
			return sr, stepEnd{stop: true, reason: fmt.Sprintf("%s; %s aborted the deployment%s", why, got.By, commentSuffix(got.Comment))}, nil
		}
		if err := d.retry(ctx, step); err != nil {
			return sr, stepEnd{}, err
		}
	}
}

// retry sets the failed step running again on its failed targets as the next round.
func (d *deciding) retry(ctx workflow.Context, step spec.Step) error {
	d.p.Round++
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: time.Minute, RetryPolicy: deploymentRetry(),
		Summary: fmt.Sprintf("retry step %d %s on its failed targets (round %d)", d.p.Step, step.Name, d.p.Round)})
	return retryRound(actx, activityio.RetryStepInput{
		StepInput: activityio.StepInput{DeploymentID: d.p.DeploymentID, Position: d.p.Step}, Round: d.p.Round,
	})
}

// runApproval waits for an approval step's decision, or its timeout, and records the
// step's end: succeeded when approved, failed (stopping the deployment) when rejected.
func (d *deciding) runApproval(ctx workflow.Context, step spec.Step) (StepResult, stepEnd, error) {
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute, RetryPolicy: deploymentRetry()})
	in := activityio.StepInput{DeploymentID: d.p.DeploymentID, Position: d.p.Step}
	sr := StepResult{Name: step.Name, Status: domain.StepFailed}
	if err := workflow.ExecuteActivity(actx, activityio.StartStep, activityio.StartStepInput{StepInput: in}).Get(ctx, nil); err != nil {
		return sr, stepEnd{}, err
	}
	deadline := workflow.Now(ctx).UTC().Add(step.ApprovalTimeout())
	got, err := d.await(ctx, Wait{Kind: events.WaitApproval, Step: d.p.Step, Approvers: step.Approvers, Deadline: &deadline}, step)
	if err != nil {
		return sr, stepEnd{}, err
	}
	end := stepEnd{}
	if got.Decision == api.DecisionApprove {
		sr.Status = domain.StepSucceeded
	} else {
		end = stepEnd{stop: true, reason: fmt.Sprintf("step %s was rejected by %s%s", step.Name, got.By, commentSuffix(got.Comment))}
	}
	err = workflow.ExecuteActivity(actx, activityio.FinishStep, activityio.FinishStepInput{StepInput: in, Status: sr.Status}).Get(ctx, nil)
	return sr, end, err
}

// await records that the deployment waits for w and blocks until a decision Update
// arrives or, for an approval, its deadline passes, when the step's on_timeout
// decides. It returns the decision.
func (d *deciding) await(ctx workflow.Context, w Wait, step spec.Step) (api.Decision, error) {
	w.Since = workflow.Now(ctx).UTC()
	d.p.Waiting, d.outcome = &w, nil
	if err := d.setWaiting(ctx, &w); err != nil {
		return api.Decision{}, err
	}
	decided := func() bool { return d.outcome != nil }
	if w.Deadline == nil {
		if err := workflow.Await(ctx, decided); err != nil {
			return api.Decision{}, err
		}
	} else if ok, err := workflow.AwaitWithTimeout(ctx, w.Deadline.Sub(w.Since), decided); err != nil {
		return api.Decision{}, err
	} else if !ok {
		rec := api.Decision{Decision: step.TimeoutDecision(), By: api.TimeoutDecider, At: workflow.Now(ctx).UTC(), Step: &w.Step,
			Comment: fmt.Sprintf("nobody decided within %s", step.ApprovalTimeout())}
		d.p.Waiting = nil
		return d.record(ctx, rec, fmt.Sprintf("timeout:%s:%d", d.p.DeploymentID, w.Step))
	}
	got := *d.outcome
	d.outcome = nil
	return got, nil
}

// awaitResume blocks while the deployment is paused; a pause takes effect between
// steps.
func (d *deciding) awaitResume(ctx workflow.Context) error {
	if !d.p.Paused || d.midStep || !decisionsEnabled(ctx) {
		return nil
	}
	w := Wait{Kind: events.WaitPaused, Step: d.p.Step, Since: workflow.Now(ctx).UTC()}
	d.p.Waiting = &w
	if err := d.setWaiting(ctx, &w); err != nil {
		return err
	}
	return workflow.Await(ctx, func() bool { return !d.p.Paused })
}

// setWaiting records what the deployment waits for (nil: nothing) for the API's view
// and a deployment.waiting event.
func (d *deciding) setWaiting(ctx workflow.Context, w *Wait) error {
	in := activityio.SetWaitingInput{DeploymentID: d.p.DeploymentID}
	if w != nil {
		d.waited = true
		in.Waiting = &events.WaitingData{Kind: w.Kind, StepPosition: w.Step, Approvers: w.Approvers, Since: w.Since, Deadline: w.Deadline}
		if w.Step < len(d.steps) {
			in.Waiting.Step = d.steps[w.Step].Name
		}
	}
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute, RetryPolicy: deploymentRetry()})
	return workflow.ExecuteActivity(actx, activityio.SetWaiting, in).Get(ctx, nil)
}

// commentSuffix is a decision's comment as the end of a reason.
func commentSuffix(comment string) string {
	if comment == "" {
		return ""
	}
	return ": " + comment
}
