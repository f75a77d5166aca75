package workflows

import (
	"fmt"
	"strings"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/mantis-deploy/mantis/internal/contract/activityio"
	"github.com/mantis-deploy/mantis/internal/contract/api"
	"github.com/mantis-deploy/mantis/internal/contract/events"
	"github.com/mantis-deploy/mantis/internal/contract/spec"
	"github.com/mantis-deploy/mantis/internal/domain"
)

// rolloutChange is the workflow.GetVersion change id of rollouts: a step in batches
// with pauses between them, a fleet-wide failure budget, a canary's health gate and
// the rollback steps of a failed deployment.
const rolloutChange = "rollouts"

// Versions of rolloutChange.
const rolloutVersion workflow.Version = 1

// rolloutsEnabled reports whether this run carries out rollouts. Only a deployment
// whose spec has one asks, and none was ever recorded without the version.
func rolloutsEnabled(ctx workflow.Context) bool {
	return workflow.GetVersion(ctx, rolloutChange, workflow.DefaultVersion, rolloutVersion) != workflow.DefaultVersion
}

// batchEnds turns a rollout's batch sizes over n targets into the end of each batch:
// the targets before it have started once that batch runs.
func batchEnds(n int, r spec.Rollout) []int {
	sizes := spec.SplitBatches(n, r.Batches)
	ends := make([]int, len(sizes))
	sum := 0
	for i, size := range sizes {
		sum += size
		ends[i] = sum
	}
	return ends
}

// failedSoFar counts the target failures of the steps that ended: what the
// fleet-wide failure budget counts across steps.
func (d *deciding) failedSoFar() int {
	n := 0
	for _, sr := range d.p.Steps {
		n += sr.Failed
	}
	return n
}

// runRollout runs a step batch by batch: a pause (a duration, or an approval) before
// each batch after the first, the canary's health gate after the first, and the
// failure budget counted across the deployment's steps. Exceeding the budget starts no
// new target; what runs finishes, or is cancelled when the rollout says so.
func (d *deciding) runRollout(ctx workflow.Context, step spec.Step, r spec.Rollout, budget *runBudget) (StepResult, stepEnd, error) {
	ends := batchEnds(d.p.Targets, r)
	limit, hasBudget := r.FailureBudget(d.p.Targets)
	failedBefore := d.failedSoFar()
	var sr StepResult
	for d.p.Batch < len(ends) {
		b := d.p.Batch
		if b > 0 && !d.p.BatchOpened {
			end, err := d.pauseBetween(ctx, step, r, b, len(ends))
			if err != nil {
				return d.currentOf(step), stepEnd{}, err // ended by whoever interrupted it
			}
			if end.stop {
				sr, err := d.stopMidStep(ctx, d.currentOf(step))
				return sr, end, err
			}
		}
		d.p.BatchOpened = true
		w := domain.StepWindow{BatchEnd: ends[b]}
		if hasBudget {
			room := limit - failedBefore
			w.FailureRoom = &room
		}
		d.cancelPastRoom = r.OnBudgetExceeded == spec.BudgetCancel
		var err error
		sr, err = advanceStep(ctx, d.p, d.p.Step, step.Name, w, budget, d)
		d.cancelPastRoom = false
		if err != nil {
			return sr, stepEnd{}, err
		}
		if hasBudget && failedBefore+sr.Failed > limit {
			sr, err = d.endOverBudget(ctx, step, r, w, budget, sr)
			return sr, stepEnd{stop: true, reason: budgetReason(r, d.p.Targets, limit, failedBefore+sr.Failed)}, err
		}
		if b == 0 && r.Canary != nil && sr.Status != domain.StepFailed {
			if end, err := d.canaryGate(ctx, step, *r.Canary, ends[0], budget); err != nil || end.stop {
				if err == nil && !sr.Done() {
					sr, err = d.stopMidStep(ctx, sr)
				}
				return sr, end, err
			}
		}
		if sr.Done() {
			break
		}
		d.p.Batch, d.p.BatchOpened = b+1, false
	}
	d.p.Batch, d.p.BatchOpened = 0, false
	if hasBudget {
		return sr, stepEnd{}, nil // its failures are within the budget
	}
	stop, why := stopsDeployment(step, sr)
	return sr, stepEnd{stop: stop, reason: why}, nil
}

// Done reports whether the summary is of a step that has ended.
func (sr StepResult) Done() bool { return sr.Status != "" }

// endOverBudget ends a step whose failures passed the budget: it cancels what runs when
// the rollout says so, then waits for the step's end (nothing new starts).
func (d *deciding) endOverBudget(ctx workflow.Context, step spec.Step, r spec.Rollout, w domain.StepWindow, budget *runBudget, sr StepResult) (StepResult, error) {
	if r.OnBudgetExceeded == spec.BudgetCancel {
		cancelDeploymentWork(withShortActivity(ctx), d.p.DeploymentID)
	}
	if sr.Done() {
		return sr, nil
	}
	return advanceStep(ctx, d.p, d.p.Step, step.Name, w, budget, d)
}

// withShortActivity gives ctx the options of a deployment's short activities.
func withShortActivity(ctx workflow.Context) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute, RetryPolicy: deploymentRetry()})
}

// budgetReason is the reason of a deployment whose failures passed its budget.
func budgetReason(r spec.Rollout, targets, limit, failed int) string {
	var set []string
	if r.MaxFailures != nil {
		set = append(set, fmt.Sprintf("max_failures %d", *r.MaxFailures))
	}
	if r.MaxFailurePercent != nil {
		set = append(set, fmt.Sprintf("max_failure_percent %g of %d targets", *r.MaxFailurePercent, targets))
	}
	return fmt.Sprintf("failure budget exceeded: %d target failures across the deployment, the budget (%s) allows %d",
		failed, strings.Join(set, ", "), limit)
}

// pauseBetween waits before batch b (0-based) of n: the rollout's pause, or an
// approval, which a reject (or its timeout) turns into the deployment's end.
func (d *deciding) pauseBetween(ctx workflow.Context, step spec.Step, r spec.Rollout, b, n int) (stepEnd, error) {
	if r.PauseBetween != spec.PauseApproval {
		if pause := r.PauseDuration(); pause > 0 {
			return stepEnd{}, workflow.Sleep(ctx, pause)
		}
		return stepEnd{}, nil
	}
	deadline := workflow.Now(ctx).UTC().Add(spec.DefaultApprovalTimeout)
	got, err := d.await(ctx, Wait{Kind: events.WaitApproval, Step: d.p.Step, Approvers: step.Approvers, Deadline: &deadline, Batch: b + 1}, step)
	if err != nil {
		return stepEnd{}, err
	}
	if got.Decision == api.DecisionApprove {
		return stepEnd{}, nil
	}
	return stepEnd{stop: true, reason: fmt.Sprintf("batch %d of %d of step %s was rejected by %s%s", b+1, n, step.Name, got.By, commentSuffix(got.Comment))}, nil
}

// stopMidStep records the end of a rollout step, summarised by sr, stopped between
// batches (a rejected batch, a failed canary): failed, its later batches skipped.
func (d *deciding) stopMidStep(ctx workflow.Context, sr StepResult) (StepResult, error) {
	sr = finishInterruptedStep(withShortActivity(ctx), d.p.DeploymentID, d.p.Step, sr, domain.DeploymentFailed)
	d.p.Batch, d.p.BatchOpened = 0, false
	return sr, nil
}

// currentOf is the latest summary of step, running now.
func (d *deciding) currentOf(step spec.Step) StepResult {
	if d.current != nil && d.current.Name == step.Name {
		return *d.current
	}
	return StepResult{Name: step.Name, Skipped: d.p.Targets}
}

// canaryGate runs the canary's verify step after a step's first batch, on the canary
// hosts (the first canaryEnd targets) or on the one host it names, and stops the
// deployment when it fails: its rollback steps then run on the targets it touched.
func (d *deciding) canaryGate(ctx workflow.Context, step spec.Step, c spec.Canary, canaryEnd int, budget *runBudget) (stepEnd, error) {
	pos, ok := d.spec.VerifyPosition(d.p.Step)
	if !ok {
		return stepEnd{}, nil
	}
	w := domain.StepWindow{Scope: canaryEnd}
	if c.VerifyOn != "" && c.VerifyOn != spec.VerifyOnCanary {
		w = domain.StepWindow{Only: c.VerifyOn}
	}
	vr, err := advanceStep(ctx, d.p, pos, "verify: "+step.Name, w, budget, d)
	if err != nil {
		return stepEnd{}, err
	}
	if vr.Status == domain.StepSucceeded {
		return stepEnd{}, nil
	}
	why := fmt.Sprintf("canary health gate of step %s failed: its verify failed on %d of %d hosts (%d checks)",
		step.Name, vr.Failed, vr.Succeeded+vr.Failed+vr.Skipped, c.Checks())
	if len(vr.FailedTargets) > 0 {
		why += fmt.Sprintf("; %s: %s", vr.FailedTargets[0].Target, failedTargetWhy(vr.FailedTargets[0]))
	}
	return stepEnd{stop: true, reason: why}, nil
}

// failedTargetWhy says in a few words why a target failed.
func failedTargetWhy(t domain.TargetResult) string {
	if t.Error != "" {
		return t.Error
	}
	if t.ExitCode != nil {
		return fmt.Sprintf("exit code %d", *t.ExitCode)
	}
	return "failed"
}

// rollBack runs the deployment's rollback steps, in order, on the targets its steps
// touched, each on every one of them whatever the others did. It returns their
// summaries and reason with how the rollback went; a failed rollback is said loudly
// and never rolls back again.
func (d *deciding) rollBack(ctx workflow.Context, reason string) ([]StepResult, string) {
	actx := withShortActivity(ctx)
	touched, err := countTouched(actx, activityio.TouchedTargetsInput{DeploymentID: d.p.DeploymentID, Steps: len(d.spec.Steps)})
	if err != nil {
		return nil, reason + "; ROLLBACK NOT RUN: counting the targets it touched failed: " + err.Error()
	}
	if touched == 0 {
		return nil, reason + "; no target was touched, nothing to roll back"
	}
	budget := &runBudget{ending: true}
	var out []StepResult
	var failed []string
	for j, rb := range d.spec.OnFailure {
		rr, err := advanceStep(ctx, d.p, d.spec.RollbackPosition(j), "rollback: "+rb.Name, domain.StepWindow{Scope: touched}, budget, d)
		if err != nil {
			rr.Status = domain.StepFailed
			failed = append(failed, fmt.Sprintf("%s (%v)", rb.Name, err))
		} else if rr.Failed > 0 {
			failed = append(failed, fmt.Sprintf("%s on %d of %d targets", rb.Name, rr.Failed, touched))
		}
		out = append(out, rr)
	}
	if len(failed) > 0 {
		return out, fmt.Sprintf("%s; ROLLBACK FAILED: %s", reason, strings.Join(failed, ", "))
	}
	return out, fmt.Sprintf("%s; rolled back on the %d targets it touched", reason, touched)
}
