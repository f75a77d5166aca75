package workflows

import (
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/mantis-deploy/mantis/internal/contract/activityio"
	"github.com/mantis-deploy/mantis/internal/contract/spec"
	"github.com/mantis-deploy/mantis/internal/domain"
)

// advanceMaxWait bounds one AdvanceStep call: a step costs one call per advanceMaxWait
// of its running time, and one call when it ends sooner.
const advanceMaxWait = 2 * time.Minute

// advanceHeartbeat is how long an AdvanceStep call may go without heartbeating (it
// heartbeats every couple of seconds) before Temporal retries it elsewhere. A cancel
// reaches the call with a heartbeat's answer, within most of this.
const advanceHeartbeat = 10 * time.Second

// A run continues as new once it has scheduled runActivityBudget activities (about six
// history events each), or once its history passes runMaxEvents events or runMaxBytes
// bytes, whichever comes first: every run stays well under a tenth of Temporal's limits
// (51,200 events, 50 MB).
const (
	runActivityBudget = 300
	runMaxEvents      = 2500
	runMaxBytes       = 2 << 20
)

// errContinueAsNew tells windowedDeployment that the run's history is long enough.
var errContinueAsNew = errors.New("continue as new")

// runBudget counts what a run has scheduled.
type runBudget struct {
	activities int
	// ending is set while the deployment ends (its rollback steps run): a run that
	// ends does not continue as new.
	ending bool
}

// spent reports whether the run should continue as new before scheduling more.
func (b *runBudget) spent(ctx workflow.Context) bool {
	if b.ending {
		return false
	}
	info := workflow.GetInfo(ctx)
	return b.activities >= runActivityBudget || info.GetContinueAsNewSuggested() ||
		info.GetCurrentHistoryLength() > runMaxEvents || info.GetCurrentHistorySize() > runMaxBytes
}

// windowedDeployment runs a deployment from where in.Progress says (from the start
// when it is nil), continuing as new whenever the run's budget is spent. Decision
// Updates (deployment_decisions.go) can pause it between steps, decide an approval
// step and answer a failed step that asks.
func windowedDeployment(ctx workflow.Context, in DeploymentInput) (DeploymentResult, error) {
	s := in.WithDefaults()
	var p DeploymentProgress
	d := &deciding{p: &p, steps: s.Steps, spec: s, midStep: in.Progress != nil}
	if err := registerDecisions(ctx, d); err != nil {
		return DeploymentResult{}, err
	}
	var err error
	if p, err = startWindowed(ctx, in); err != nil {
		return DeploymentResult{}, err
	}
	upsertDeploymentStarted(ctx, p.DeploymentID, s)

	budget := &runBudget{}
	status, reason := domain.DeploymentSucceeded, ""
	var interrupted *StepResult
	for p.Step < len(s.Steps) {
		if ctx.Err() != nil || d.awaitResume(ctx) != nil {
			status, reason = domain.DeploymentCancelled, cancelledReason
			break
		}
		step := s.Steps[p.Step]
		sr, end, err := d.runStep(ctx, step, budget)
		if errors.Is(err, errContinueAsNew) {
			return continueAsNew(ctx, s, p)
		}
		if err != nil {
			interrupted = &sr
			status, reason = interruptedStatus(ctx, step, err)
			break
		}
		p.Steps = append(p.Steps, sr)
		p.Step, p.Round, d.current, d.midStep = p.Step+1, 0, nil, false
		if end.stop {
			status, reason = domain.DeploymentFailed, end.reason
			break
		}
	}
	d.ended = true
	return endWindowed(ctx, s, p, status, reason, interrupted, d)
}

// continueAsNew hands p to the next run once every decision Update in flight has
// been recorded, so that none is lost between runs.
func continueAsNew(ctx workflow.Context, s spec.Deployment, p DeploymentProgress) (DeploymentResult, error) {
	if err := workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) }); err != nil {
		return DeploymentResult{}, err
	}
	next := s
	next.Targets, next.TargetSelector = nil, nil // resolved and recorded already
	return DeploymentResult{}, workflow.NewContinueAsNewError(ctx, DeploymentWorkflowType, DeploymentInput{Deployment: next, Progress: &p})
}

// startWindowed records the deployment and counts its targets in the first run; a run
// continued as new takes the progress it was handed.
func startWindowed(ctx workflow.Context, in DeploymentInput) (DeploymentProgress, error) {
	if in.Progress != nil {
		return *in.Progress, nil
	}
	// Recording the deployment finishes even if a cancel arrives meanwhile, so that a
	// cancelled deployment is recorded as cancelled rather than left running.
	startCtx, _ := workflow.NewDisconnectedContext(workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: time.Minute, RetryPolicy: deploymentRetry(),
		Summary: fmt.Sprintf("record deployment %s and resolve its targets", in.Name)}))
	var started activityio.StartDeploymentResult
	if err := workflow.ExecuteActivity(startCtx, activityio.StartDeployment, activityio.StartDeploymentInput{
		WorkflowID: workflow.GetInfo(ctx).WorkflowExecution.ID, Spec: in.Deployment, CountOnly: true,
	}).Get(startCtx, &started); err != nil {
		return DeploymentProgress{}, err
	}
	return DeploymentProgress{DeploymentID: started.DeploymentID, Targets: started.TargetCount}, nil
}

// runWindowedStep calls AdvanceStep until the step ends, and returns its summary. It
// returns errContinueAsNew, with the step still running on the database side, when the
// run's budget is spent: the next run goes on with the same step.
func runWindowedStep(ctx workflow.Context, p *DeploymentProgress, step spec.Step, budget *runBudget, d *deciding) (StepResult, error) {
	return advanceStep(ctx, p, p.Step, step.Name, domain.StepWindow{}, budget, d)
}

// advanceStep calls AdvanceStep for the step at pos, within w, until the step ends or,
// with a batch end, the batch ends, and returns its summary. It returns
// errContinueAsNew, with the step still running on the database side, when the run's
// budget is spent: the next run goes on with the same step. With a failure room and
// stopAtRoom it returns as soon as the failures pass the room.
func advanceStep(ctx workflow.Context, p *DeploymentProgress, pos int, name string, w domain.StepWindow, budget *runBudget, d *deciding) (StepResult, error) {
	total := w.Total(p.Targets)
	sr := StepResult{Name: name, Skipped: total}
	in := activityio.AdvanceStepInput{StepInput: activityio.StepInput{DeploymentID: p.DeploymentID, Position: pos}, MaxWait: advanceMaxWait, Window: w}
	summary := fmt.Sprintf("run step %d %s on %d targets", pos, name, total)
	if w.BatchEnd > 0 && w.BatchEnd < total {
		summary = fmt.Sprintf("run step %d %s on its targets up to %d of %d", pos, name, w.BatchEnd, total)
	}
	for {
		if budget.spent(ctx) {
			return sr, errContinueAsNew
		}
		// A cancelled deployment waits for the call to stop before it cancels the
		// step's work: a call still running would record the cancelled commands as
		// the step failing, or start more targets.
		actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
			StartToCloseTimeout: advanceMaxWait + time.Minute, HeartbeatTimeout: advanceHeartbeat,
			WaitForCancellation: true, RetryPolicy: deploymentRetry(), Summary: summary,
		})
		budget.activities++
		var got activityio.AdvanceStepResult
		if err := workflow.ExecuteActivity(actx, activityio.AdvanceStep, in).Get(ctx, &got); err != nil {
			return sr, err
		}
		sr = StepResult{Name: name, Status: got.Status, Succeeded: got.Succeeded, Failed: got.Failed,
			Skipped: got.Skipped, FailedTargets: got.FailedTargets}
		d.current = &sr
		if got.Done || got.BatchDone || (w.FailureRoom != nil && d.cancelPastRoom && got.Failed > *w.FailureRoom) {
			return sr, nil
		}
		summary = fmt.Sprintf("step %d %s: %d of %d targets ended, %d running",
			pos, name, got.Succeeded+got.Failed, got.Total, got.Running)
	}
}

// endWindowed ends the deployment whatever stopped it: it cancels what an interrupted
// step left outstanding and records that step's end, skips the steps that never ran,
// and records the deployment's end. It runs even when the workflow was cancelled.
func endWindowed(ctx workflow.Context, s spec.Deployment, p DeploymentProgress, status, reason string, interrupted *StepResult, d *deciding) (DeploymentResult, error) {
	endCtx, _ := workflow.NewDisconnectedContext(workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: time.Minute, RetryPolicy: deploymentRetry()}))
	if interrupted != nil || status == domain.DeploymentCancelled {
		cancelDeploymentWork(endCtx, p.DeploymentID)
	}
	if interrupted != nil {
		p.Steps = append(p.Steps, finishInterruptedStep(endCtx, p.DeploymentID, p.Step, *interrupted, status))
	}
	var rollback []StepResult
	if status == domain.DeploymentFailed && len(s.OnFailure) > 0 && rolloutsEnabled(ctx) {
		rollback, reason = d.rollBack(endCtx, reason)
	}
	// The rows after the spec's steps (rollback and verify steps) that never ran are
	// skipped too.
	if from := len(p.Steps); from < len(s.Steps) || s.HasRollouts() {
		if err := workflow.ExecuteActivity(endCtx, activityio.SkipSteps, activityio.SkipStepsInput{DeploymentID: p.DeploymentID, From: from}).Get(endCtx, nil); err != nil {
			workflow.GetLogger(ctx).Error("skipping steps failed", "from", from, "err", err)
		}
		for _, st := range s.Steps[from:] {
			p.Steps = append(p.Steps, StepResult{Name: st.Name, Status: domain.StepSkipped, Skipped: p.Targets})
		}
	}
	if d.waited || p.Waiting != nil || p.Paused {
		if err := d.setWaiting(endCtx, nil); err != nil {
			workflow.GetLogger(ctx).Error("clearing the wait failed", "err", err)
		}
	}
	_ = workflow.Await(endCtx, func() bool { return workflow.AllHandlersFinished(endCtx) })
	result := DeploymentResult{DeploymentID: p.DeploymentID, Status: domain.DeploymentRunning, Steps: p.Steps, Rollback: rollback}
	return finishDeployment(endCtx, result, status, reason)
}
