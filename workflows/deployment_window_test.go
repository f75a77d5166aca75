package workflows

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/mantis-deploy/mantis/activities"
	"github.com/mantis-deploy/mantis/internal/contract/activityio"
	"github.com/mantis-deploy/mantis/internal/contract/spec"
	"github.com/mantis-deploy/mantis/internal/domain"
)

// windowTest runs the Deployment workflow with mocked activities, recording what it
// schedules and the search attributes it sets.
type windowTest struct {
	env *testsuite.TestWorkflowEnvironment
	rec *scheduleRecorder
	// targets is the count StartDeployment answers with.
	targets int
	// start answers the nth StartDeployment attempt (from 0); by default it names
	// testDeploymentID and counts targets, and refuses to list the target names.
	start func(n int, in activityio.StartDeploymentInput) (activityio.StartDeploymentResult, error)
	// advance answers the nth AdvanceStep call (from 0); by default every step ends at
	// its first call with every target succeeded.
	advance func(ctx context.Context, n int, in activityio.AdvanceStepInput) (activityio.AdvanceStepResult, error)
	// end answers EndDeployment with the deployment's final status; by default the
	// status asked for.
	end func(in activityio.FinishDeploymentInput) (string, error)

	mu      sync.Mutex
	starts  int
	calls   int
	upserts []upsert
}

func setupWindow(t *testing.T) *windowTest {
	t.Helper()
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(log.NewStructuredLogger(slog.New(slog.DiscardHandler)))
	env := suite.NewTestWorkflowEnvironment()
	env.SetStartTime(testStart)
	env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: DeploymentWorkflowID(testDeploymentID)})
	rec := &scheduleRecorder{}
	env.SetWorkerOptions(worker.Options{Interceptors: []interceptor.WorkerInterceptor{rec}})
	env.RegisterWorkflowWithOptions(Deployment, workflow.RegisterOptions{Name: DeploymentWorkflowType})
	env.RegisterActivity(&activities.Activities{})
	wt := &windowTest{env: env, rec: rec, targets: 3}
	wt.start = func(_ int, in activityio.StartDeploymentInput) (activityio.StartDeploymentResult, error) {
		if !in.CountOnly {
			return activityio.StartDeploymentResult{}, errors.New("target names asked for")
		}
		return activityio.StartDeploymentResult{DeploymentID: testDeploymentID, TargetCount: wt.targets}, nil
	}
	wt.advance = func(_ context.Context, _ int, in activityio.AdvanceStepInput) (activityio.AdvanceStepResult, error) {
		return domain.StepProgress{Total: wt.targets, Enqueued: wt.targets, Succeeded: wt.targets, Done: true, Status: "succeeded"}, nil
	}
	wt.end = func(in activityio.FinishDeploymentInput) (string, error) { return in.Status, nil }
	var a *activities.Activities
	env.OnActivity(a.StartDeployment, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activityio.StartDeploymentInput) (activityio.StartDeploymentResult, error) {
			wt.mu.Lock()
			n := wt.starts
			wt.starts++
			wt.mu.Unlock()
			return wt.start(n, in)
		})
	env.OnActivity(a.AdvanceStep, mock.Anything, mock.Anything).Return(
		func(ctx context.Context, in activityio.AdvanceStepInput) (activityio.AdvanceStepResult, error) {
			wt.mu.Lock()
			n := wt.calls
			wt.calls++
			wt.mu.Unlock()
			return wt.advance(ctx, n, in)
		})
	env.OnActivity(a.FinishStep, mock.Anything, mock.Anything).Return(nil)
	env.OnActivity(a.SkipSteps, mock.Anything, mock.Anything).Return(nil)
	env.OnActivity(a.CancelDeployment, mock.Anything, mock.Anything).Return(activityio.CancelDeploymentResult{}, nil)
	env.OnActivity(a.EndDeployment, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activityio.FinishDeploymentInput) (activityio.EndDeploymentResult, error) {
			final, err := wt.end(in)
			return activityio.EndDeploymentResult{Status: final}, err
		})
	env.OnUpsertTypedSearchAttributes(mock.Anything).Run(func(args mock.Arguments) {
		u := upsert{Attributes: args.Get(0).(temporal.SearchAttributes), Scheduled: len(rec.all())}
		wt.mu.Lock()
		defer wt.mu.Unlock()
		wt.upserts = append(wt.upserts, u)
	}).Return()
	return wt
}

// run runs one run of the deployment, whose input is a DeploymentInput or what a
// Temporal client sends; the result of a failed deployment is read from the error's
// details.
func (wt *windowTest) run(in any) (DeploymentResult, error) {
	wt.env.ExecuteWorkflow(DeploymentWorkflowType, in)
	var res DeploymentResult
	err := wt.env.GetWorkflowError()
	if err == nil {
		return res, wt.env.GetWorkflowResult(&res)
	}
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) && appErr.HasDetails() {
		_ = appErr.Details(&res)
	}
	return res, err
}

// searchAttributeUpserts returns the recorded UpsertTypedSearchAttributes calls.
func (wt *windowTest) searchAttributeUpserts() []upsert {
	wt.mu.Lock()
	defer wt.mu.Unlock()
	return append([]upsert(nil), wt.upserts...)
}

// startAttempts returns how many times StartDeployment ran.
func (wt *windowTest) startAttempts() int {
	wt.mu.Lock()
	defer wt.mu.Unlock()
	return wt.starts
}

// advancedPositions returns the step position of each AdvanceStep call.
func advancedPositions(t *testing.T, rec *scheduleRecorder) []int {
	t.Helper()
	var out []int
	for _, in := range inputsOf[activityio.AdvanceStepInput](t, rec, advanceActivity) {
		out = append(out, in.Position)
	}
	return out
}

func progress(total, ended, running int) domain.StepProgress {
	return domain.StepProgress{Total: total, Enqueued: ended + running, Succeeded: ended, Running: running, Skipped: total - ended - running}
}

func TestWindowedDeploymentRunsEachStepOnTheDatabaseSide(t *testing.T) {
	t.Parallel()
	wt := setupWindow(t)
	wt.targets = spec.MaxTargets
	wt.advance = func(_ context.Context, n int, in activityio.AdvanceStepInput) (activityio.AdvanceStepResult, error) {
		if n%3 < 2 { // each step answers twice with progress, then ends
			return progress(wt.targets, (n%3+1)*100, 1), nil
		}
		return domain.StepProgress{Total: wt.targets, Enqueued: wt.targets, Succeeded: wt.targets, Done: true, Status: "succeeded"}, nil
	}
	res, err := wt.run(DeploymentInput{Deployment: deploymentSpec([]string{"web-1"}, 3)})
	require.NoError(t, err)
	require.Equal(t, domain.DeploymentSucceeded, res.Status)
	require.Len(t, res.Steps, 3)
	for _, s := range res.Steps {
		require.Equal(t, StepResult{Name: s.Name, Status: "succeeded", Succeeded: spec.MaxTargets}, s)
	}
	require.Equal(t, []string{startDeploymentActivity,
		advanceActivity, advanceActivity, advanceActivity,
		advanceActivity, advanceActivity, advanceActivity,
		advanceActivity, advanceActivity, advanceActivity,
		finishDeploymentActivity}, wt.rec.sequence(), "no enqueue or await round per target, no FinishStep: the window is on the database side")
	require.Equal(t, []int{0, 0, 0, 1, 1, 1, 2, 2, 2}, advancedPositions(t, wt.rec))
}

func TestWindowedDeploymentStopsOnAFailedStepAndSkipsTheRest(t *testing.T) {
	t.Parallel()
	wt := setupWindow(t)
	code := 1
	failed := []domain.TargetResult{{Target: "web-2", Status: "failed", ExitCode: &code, Error: "exit code 1"}}
	wt.advance = func(_ context.Context, n int, in activityio.AdvanceStepInput) (activityio.AdvanceStepResult, error) {
		if in.Position == 1 {
			return domain.StepProgress{Total: 3, Enqueued: 2, Succeeded: 1, Failed: 1, Skipped: 1, Done: true, Status: "failed", FailedTargets: failed}, nil
		}
		return domain.StepProgress{Total: 3, Enqueued: 3, Succeeded: 3, Done: true, Status: "succeeded"}, nil
	}
	res, err := wt.run(DeploymentInput{Deployment: deploymentSpec([]string{"web-1"}, 4)})
	var appErr *temporal.ApplicationError
	require.True(t, errors.As(err, &appErr), "got %v", err)
	require.Equal(t, activityio.DeploymentFailed, appErr.Type())
	require.Equal(t, domain.DeploymentFailed, res.Status)
	require.Equal(t, []StepResult{
		{Name: "step-0", Status: "succeeded", Succeeded: 3},
		{Name: "step-1", Status: "failed", Succeeded: 1, Failed: 1, Skipped: 1, FailedTargets: failed},
		{Name: "step-2", Status: "skipped", Skipped: 3},
		{Name: "step-3", Status: "skipped", Skipped: 3},
	}, res.Steps)
	require.Equal(t, []activityio.SkipStepsInput{{DeploymentID: testDeploymentID, From: 2}}, inputsOf[activityio.SkipStepsInput](t, wt.rec, skipStepsActivity),
		"the steps that never ran are skipped in one call")
	require.Equal(t, domain.DeploymentFailed, inputsOf[activityio.FinishDeploymentInput](t, wt.rec, finishDeploymentActivity)[0].Status)
}

// A step that outlasts a run's budget continues as new in the middle, handing over
// only where it stands; the next run goes on with the same step without starting the
// deployment again.
func TestWindowedDeploymentContinuesAsNewInsideALongStep(t *testing.T) {
	t.Parallel()
	wt := setupWindow(t)
	wt.targets = spec.MaxTargets
	wt.advance = func(context.Context, int, activityio.AdvanceStepInput) (activityio.AdvanceStepResult, error) {
		return progress(wt.targets, 10, 1), nil // never done in this run
	}
	d := deploymentSpec(make([]string, 0), 2)
	for i := range spec.MaxTargets {
		d.Targets = append(d.Targets, fmt.Sprintf("web-%05d", i))
	}
	_, err := wt.run(DeploymentInput{Deployment: d})
	var can *workflow.ContinueAsNewError
	require.True(t, errors.As(err, &can), "got %v", err)
	require.Equal(t, runActivityBudget, len(wt.rec.of(advanceActivity)))
	var next DeploymentInput
	require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(can.Input, &next))
	require.Equal(t, &DeploymentProgress{DeploymentID: testDeploymentID, Targets: spec.MaxTargets, Step: 0}, next.Progress)
	require.Empty(t, next.Targets, "the target names are not carried over")
	require.Len(t, next.Steps, 2)
	require.Less(t, can.Input.Size(), 4096, "the handed-over input stays small")

	// The next run: the step ends, the deployment finishes, nothing is started twice.
	wt2 := setupWindow(t)
	wt2.targets = spec.MaxTargets
	res, err := wt2.run(next)
	require.NoError(t, err)
	require.Equal(t, domain.DeploymentSucceeded, res.Status)
	require.Empty(t, wt2.rec.of(startDeploymentActivity))
	require.Equal(t, []int{0, 1}, advancedPositions(t, wt2.rec))
}

func TestWindowedDeploymentCancelledWhileAdvancing(t *testing.T) {
	t.Parallel()
	wt := setupWindow(t)
	// The test environment resolves a cancelled activity without cancelling its
	// context: the call blocks until the test ends.
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	wt.advance = func(ctx context.Context, n int, in activityio.AdvanceStepInput) (activityio.AdvanceStepResult, error) {
		if in.Position == 0 {
			return domain.StepProgress{Total: 3, Enqueued: 3, Succeeded: 3, Done: true, Status: "succeeded"}, nil
		}
		wt.env.CancelWorkflow() // step 1 is running when the deployment is cancelled
		select {
		case <-ctx.Done():
		case <-release:
		}
		return domain.StepProgress{}, errors.New("the call outlived the deployment")
	}
	_, err := wt.run(DeploymentInput{Deployment: deploymentSpec([]string{"web-1"}, 3)})
	require.True(t, temporal.IsCanceledError(err), "got %v", err)
	require.Equal(t, []string{startDeploymentActivity, advanceActivity, advanceActivity,
		cancelWorkActivity, finishStepActivity, skipStepsActivity, finishDeploymentActivity}, wt.rec.sequence())
	finish := inputsOf[activityio.FinishStepInput](t, wt.rec, finishStepActivity)
	require.Equal(t, "cancelled", finish[0].Status)
	require.Equal(t, 1, finish[0].Position)
	require.Equal(t, 2, inputsOf[activityio.SkipStepsInput](t, wt.rec, skipStepsActivity)[0].From)
	require.Equal(t, domain.DeploymentCancelled, inputsOf[activityio.FinishDeploymentInput](t, wt.rec, finishDeploymentActivity)[0].Status)
}
