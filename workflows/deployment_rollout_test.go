package workflows

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/contract/activityio"
	"github.com/mantis-deploy/mantis/internal/contract/spec"
	"github.com/mantis-deploy/mantis/internal/domain"
)

// budgetRun runs a one-step rollout of four targets in batches of two with a budget
// of no failure; the first batch's first AdvanceStep reports a failure while a
// target still runs, the next ends the step. It returns the workflow's error and the
// AdvanceStep windows asked for.
func budgetRun(t *testing.T, onExceeded string) (*windowTest, error) {
	t.Helper()
	wt := setupWindow(t)
	wt.targets = 4
	wt.advance = func(_ context.Context, n int, in activityio.AdvanceStepInput) (activityio.AdvanceStepResult, error) {
		if n == 0 {
			return domain.StepProgress{Total: 4, Enqueued: 2, Failed: 1, Running: 1, Skipped: 2}, nil
		}
		return domain.StepProgress{Total: 4, Enqueued: 2, Failed: 1, Succeeded: 1, Skipped: 2, Done: true, Status: domain.StepFailed}, nil
	}
	none := 0
	d := deploymentSpec([]string{"web-1", "web-2", "web-3", "web-4"}, 1)
	d.Rollout = &spec.Rollout{Batches: []spec.BatchSize{{Count: 2}}, MaxFailures: &none, OnBudgetExceeded: onExceeded}
	_, err := wt.run(DeploymentInput{Deployment: d})
	return wt, err
}

// A budget exceeded with on_budget_exceeded: cancel cancels what still runs at once;
// with finish it lets it end. Either way no later batch starts and the deployment
// fails naming the budget.
func TestExceededBudgetCancelsOrFinishesWhatRuns(t *testing.T) {
	t.Parallel()
	for mode, cancels := range map[string]int{spec.BudgetCancel: 1, spec.BudgetFinish: 0, "": 0} {
		wt, err := budgetRun(t, mode)
		require.ErrorContains(t, err, "failure budget exceeded: 1 target failures across the deployment", "mode %q", mode)
		require.Len(t, wt.rec.of("CancelDeployment"), cancels, "mode %q", mode)
		for _, in := range inputsOf[activityio.AdvanceStepInput](t, wt.rec, advanceActivity) {
			require.Equal(t, 2, in.Window.BatchEnd, "mode %q: only the first batch ever starts", mode)
			require.NotNil(t, in.Window.FailureRoom)
			require.Zero(t, *in.Window.FailureRoom)
		}
	}
}
