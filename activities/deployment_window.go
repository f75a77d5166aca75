package activities

import (
	"context"
	"errors"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/mantis-deploy/mantis/internal/contract/activityio"
	"github.com/mantis-deploy/mantis/internal/domain"
	"github.com/mantis-deploy/mantis/schema"
)

// advanceRecheck re-reads the step when no notification came: one can be missed across
// a reconnect of the LISTEN connection.
const advanceRecheck = 2 * time.Second

// AdvanceStep runs a step on the database side until it ends or MaxWait passes: it
// starts the step, enqueues its targets up to max_parallel, and as results land tops
// the window up again, in the transaction that counts them (schema.AdvanceStep). The
// answer is small and a step costs one call per MaxWait, however many targets and
// whatever max_parallel.
func (a *Activities) AdvanceStep(ctx context.Context, in activityio.AdvanceStepInput) (activityio.AdvanceStepResult, error) {
	id, err := deploymentID(in.DeploymentID)
	if err != nil {
		return activityio.AdvanceStepResult{}, err
	}
	wake, deadline, stop := a.waitForResults(id, in.MaxWait)
	defer stop()
	for {
		p, started, err := schema.AdvanceStepStarting(ctx, a.DB, id, in.Position, in.Window)
		var inputErr *domain.InputError
		if errors.As(err, &inputErr) {
			return activityio.AdvanceStepResult{}, temporal.NewNonRetryableApplicationError(inputErr.Error(), activityio.InvalidSpec, nil)
		}
		if err != nil {
			return activityio.AdvanceStepResult{}, err
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
			return activityio.AdvanceStepResult{}, ctx.Err()
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

// SkipSteps records every step from From on that never started as skipped, in one call
// whatever their number.
func (a *Activities) SkipSteps(ctx context.Context, in activityio.SkipStepsInput) error {
	id, err := deploymentID(in.DeploymentID)
	if err != nil {
		return err
	}
	return schema.SkipSteps(ctx, a.DB, id, in.From)
}
