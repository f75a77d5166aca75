package activities

import (
	"context"
	"errors"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/mantis-deploy/mantis/internal/domain"
	"github.com/mantis-deploy/mantis/schema"
)

// AdvanceStepInput names a step whose window to keep, and how long one call may wait.
type AdvanceStepInput struct {
	StepInput
	// MaxWait bounds the call; the workflow calls again while the step is not done.
	MaxWait time.Duration `json:"max_wait"`
	// Window narrows the step to a rollout's batch, failure room, or a rollback's or
	// verify's targets; the zero window is the whole step.
	Window domain.StepWindow `json:"window,omitzero"`
}

// AdvanceStepResult is where the step stands: counts and up to 20 failed targets,
// never the list of targets, whatever their number.
type AdvanceStepResult = domain.StepProgress

// advanceRecheck re-reads the step when no notification came: one can be missed across
// a reconnect of the LISTEN connection.
const advanceRecheck = 2 * time.Second

// AdvanceStep runs a step on the database side until it ends or MaxWait passes: it
// starts the step, enqueues its targets up to max_parallel, and as results land tops
// the window up again, in the transaction that counts them (schema.AdvanceStep). The
// answer is small and a step costs one call per MaxWait, however many targets and
// whatever max_parallel.
func (a *Activities) AdvanceStep(ctx context.Context, in AdvanceStepInput) (AdvanceStepResult, error) {
	id, err := in.id()
	if err != nil {
		return AdvanceStepResult{}, err
	}
	wake, deadline, stop := a.waitForResults(id, in.MaxWait)
	defer stop()
	for {
		p, started, err := schema.AdvanceStepStarting(ctx, a.DB, id, in.Position, in.Window)
		var inputErr *schema.InputError
		if errors.As(err, &inputErr) {
			return AdvanceStepResult{}, temporal.NewNonRetryableApplicationError(inputErr.Error(), InvalidSpec, nil)
		}
		if err != nil {
			return AdvanceStepResult{}, err
		}
		if started {
			a.Metrics.stepStarted(p.Total)
		}
		if p.Done || p.BatchDone {
			return p, nil
		}
		activity.RecordHeartbeat(ctx, p.Enqueued-p.Running)
		select {
		case <-ctx.Done():
			return AdvanceStepResult{}, ctx.Err()
		case <-deadline.C:
			return p, nil
		case <-wake:
			// Results often land together: let them, then count them once.
			select {
			case <-time.After(resultCoalesce):
			case <-ctx.Done():
			}
		case <-time.After(advanceRecheck):
		}
	}
}

// SkipStepsInput names the first step of a deployment that will not run.
type SkipStepsInput struct {
	DeploymentID string `json:"deployment_id"`
	From         int    `json:"from"`
}

// SkipSteps records every step from From on that never started as skipped, in one call
// whatever their number.
func (a *Activities) SkipSteps(ctx context.Context, in SkipStepsInput) error {
	id, err := StepInput{DeploymentID: in.DeploymentID}.id()
	if err != nil {
		return err
	}
	return schema.SkipSteps(ctx, a.DB, id, in.From)
}
