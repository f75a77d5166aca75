package workflows

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
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

// Activity type names as the Deployment workflow schedules them.
const (
	startDeploymentActivity  = "StartDeployment"
	startStepActivity        = "StartStep"
	enqueueActivity          = "EnqueueStepTargets"
	awaitActivity            = "AwaitStepResults"
	finishStepActivity       = "FinishStep"
	finishDeploymentActivity = "EndDeployment"
	cancelWorkActivity       = "CancelDeployment"
)

// testDeploymentID is the deployment id StartDeployment answers with.
const testDeploymentID = "3f0c8a52-6b1e-4d7a-9c2f-0d5e8b7a1c44"

// upsert is one UpsertTypedSearchAttributes call.
type upsert struct {
	Attributes temporal.SearchAttributes
	// Scheduled is how many activities had been scheduled before it.
	Scheduled int
}

// deploymentTest is what a deployment test needs: the environment, the recorders, and
// the behaviour of the mocked activities, which a test may replace before it runs the
// workflow.
type deploymentTest struct {
	env  *testsuite.TestWorkflowEnvironment
	rec  *scheduleRecorder
	logs *logRecorder

	// targets are the resolved targets StartDeployment answers with.
	targets []string
	// start answers the nth StartDeployment attempt (from 0).
	start func(n int, in activityio.StartDeploymentInput) (activityio.StartDeploymentResult, error)
	// await answers each AwaitStepResults call; by default every waited-for target
	// succeeded.
	await func(ctx context.Context, in activityio.AwaitStepResultsInput) (activityio.AwaitStepResultsResult, error)
	// finish answers FinishDeployment; by default with the status asked for.
	finish func(in activityio.FinishDeploymentInput) (string, error)
	// enqueue answers EnqueueStepTargets; by default it succeeds.
	enqueue func(in activityio.EnqueueStepTargetsInput) error

	mu      sync.Mutex
	upserts []upsert
}

func setupDeployment(t *testing.T) *deploymentTest {
	t.Helper()
	logs := newLogRecorder()
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(log.NewStructuredLogger(slog.New(logs)))
	env := suite.NewTestWorkflowEnvironment()
	env.SetStartTime(testStart)
	env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: DeploymentWorkflowID(testDeploymentID)})
	rec := &scheduleRecorder{}
	env.SetWorkerOptions(worker.Options{Interceptors: []interceptor.WorkerInterceptor{rec}})
	env.RegisterWorkflowWithOptions(Deployment, workflow.RegisterOptions{Name: DeploymentWorkflowType})
	env.RegisterActivity(&activities.Activities{})
	// These tests cover the runs recorded before windowInDatabaseChange, which still
	// replay through legacyDeployment; deployment_window_test.go covers new runs.
	env.OnGetVersion(windowInDatabaseChange, workflow.DefaultVersion, deploymentWindowVersion).Return(workflow.DefaultVersion)

	dt := &deploymentTest{env: env, rec: rec, logs: logs, targets: []string{"web-1", "web-2", "web-3"}}
	dt.start = func(int, activityio.StartDeploymentInput) (activityio.StartDeploymentResult, error) {
		return activityio.StartDeploymentResult{DeploymentID: testDeploymentID, Targets: dt.targets}, nil
	}
	dt.await = func(_ context.Context, in activityio.AwaitStepResultsInput) (activityio.AwaitStepResultsResult, error) {
		return activityio.AwaitStepResultsResult{Results: succeededResults(in.Waiting...)}, nil
	}
	dt.finish = func(in activityio.FinishDeploymentInput) (string, error) {
		return in.Status, nil
	}

	var mu sync.Mutex
	starts := 0
	var a *activities.Activities
	env.OnActivity(a.StartDeployment, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activityio.StartDeploymentInput) (activityio.StartDeploymentResult, error) {
			mu.Lock()
			n := starts
			starts++
			mu.Unlock()
			return dt.start(n, in)
		})
	env.OnActivity(a.StartStep, mock.Anything, mock.Anything).Return(nil)
	env.OnActivity(a.EnqueueStepTargets, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activityio.EnqueueStepTargetsInput) error {
			if dt.enqueue == nil {
				return nil
			}
			return dt.enqueue(in)
		})
	env.OnActivity(a.AwaitStepResults, mock.Anything, mock.Anything).Return(
		func(ctx context.Context, in activityio.AwaitStepResultsInput) (activityio.AwaitStepResultsResult, error) {
			return dt.await(ctx, in)
		})
	env.OnActivity(a.FinishStep, mock.Anything, mock.Anything).Return(nil)
	env.OnActivity(a.EndDeployment, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activityio.FinishDeploymentInput) (activityio.EndDeploymentResult, error) {
			final, err := dt.finish(in)
			return activityio.EndDeploymentResult{Status: final}, err
		})
	env.OnActivity(a.CancelDeployment, mock.Anything, mock.Anything).Return(activityio.CancelDeploymentResult{}, nil)
	env.OnUpsertTypedSearchAttributes(mock.Anything).Run(func(args mock.Arguments) {
		u := upsert{Attributes: args.Get(0).(temporal.SearchAttributes), Scheduled: len(rec.all())}
		dt.mu.Lock()
		defer dt.mu.Unlock()
		dt.upserts = append(dt.upserts, u)
	}).Return()
	return dt
}

// run runs the deployment to completion and returns its result and error. The result
// of a failed deployment is read from the error's details.
func (dt *deploymentTest) run(in any) (DeploymentResult, error) {
	dt.env.ExecuteWorkflow(DeploymentWorkflowType, in)
	if !dt.env.IsWorkflowCompleted() {
		return DeploymentResult{}, errors.New("deployment did not complete")
	}
	var res DeploymentResult
	err := dt.env.GetWorkflowError()
	if err == nil {
		if rerr := dt.env.GetWorkflowResult(&res); rerr != nil {
			return res, rerr
		}
		return res, nil
	}
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) && appErr.HasDetails() {
		_ = appErr.Details(&res)
	}
	return res, err
}

// searchAttributeUpserts returns the recorded UpsertTypedSearchAttributes calls.
func (dt *deploymentTest) searchAttributeUpserts() []upsert {
	dt.mu.Lock()
	defer dt.mu.Unlock()
	return append([]upsert(nil), dt.upserts...)
}

// inputsOf returns the inputs of the recorded activities of one type.
func inputsOf[T any](t *testing.T, rec *scheduleRecorder, activity string) []T {
	t.Helper()
	var out []T
	for _, s := range rec.of(activity) {
		in, ok := s.Input.(T)
		require.True(t, ok, "%s input is %T", activity, s.Input)
		out = append(out, in)
	}
	return out
}

// deploymentSpec is a valid spec running steps steps (named step-0, step-1, ...) on
// targets.
func deploymentSpec(targets []string, steps int) spec.Deployment {
	d := spec.Deployment{Name: "web-rollout", Priority: "high", Targets: targets}
	for i := range steps {
		d.Steps = append(d.Steps, spec.Step{Name: fmt.Sprintf("step-%d", i), Command: fmt.Sprintf("./deploy.sh %d", i)})
	}
	return d
}

// succeededResults reports targets as having run their step successfully.
func succeededResults(targets ...string) []domain.TargetResult {
	out := make([]domain.TargetResult, len(targets))
	for i, t := range targets {
		out[i] = domain.TargetResult{Target: t, Status: "succeeded", ExitCode: new(int)}
	}
	return out
}

// failedResult reports target as having failed its step with exit code 1.
func failedResult(target string) domain.TargetResult {
	code := 1
	return domain.TargetResult{Target: target, Status: "failed", ExitCode: &code, Error: "exit status 1"}
}

// stepPositions returns the step positions of the recorded activities of one type.
func stepPositions(t *testing.T, rec *scheduleRecorder, activity string) []int {
	t.Helper()
	var out []int
	for _, s := range rec.all() {
		if s.Activity != activity {
			continue
		}
		switch in := s.Input.(type) {
		case activityio.StartStepInput:
			out = append(out, in.Position)
		case activityio.EnqueueStepTargetsInput:
			out = append(out, in.Position)
		case activityio.AwaitStepResultsInput:
			out = append(out, in.Position)
		case activityio.FinishStepInput:
			out = append(out, in.Position)
		default:
			t.Fatalf("%s input %T has no position", activity, s.Input)
		}
	}
	return out
}

// waitingOf returns what each AwaitStepResults call waited for.
func waitingOf(t *testing.T, rec *scheduleRecorder) [][]string {
	t.Helper()
	var out [][]string
	for _, in := range inputsOf[activityio.AwaitStepResultsInput](t, rec, awaitActivity) {
		out = append(out, in.Waiting)
	}
	return out
}

// enqueuedOf returns the targets of each EnqueueStepTargets call.
func enqueuedOf(t *testing.T, rec *scheduleRecorder) [][]string {
	t.Helper()
	var out [][]string
	for _, in := range inputsOf[activityio.EnqueueStepTargetsInput](t, rec, enqueueActivity) {
		out = append(out, in.Targets)
	}
	return out
}

// joinBatches concatenates batches in order.
func joinBatches(batches [][]string) []string {
	var out []string
	for _, b := range batches {
		out = append(out, b...)
	}
	return out
}

func TestDeploymentRunsStepsInOrder(t *testing.T) {
	t.Parallel()
	dt := setupDeployment(t)
	in := deploymentSpec(dt.targets, 3)

	res, err := dt.run(in)

	require.NoError(t, err)
	perStep := []string{startStepActivity, enqueueActivity, awaitActivity, finishStepActivity}
	want := []string{startDeploymentActivity}
	for range in.Steps {
		want = append(want, perStep...)
	}
	want = append(want, finishDeploymentActivity)
	require.Equal(t, want, dt.rec.sequence())
	for _, activity := range perStep {
		require.Equal(t, []int{0, 1, 2}, stepPositions(t, dt.rec, activity), activity)
	}

	starts := inputsOf[activityio.StartStepInput](t, dt.rec, startStepActivity)
	enqueues := inputsOf[activityio.EnqueueStepTargetsInput](t, dt.rec, enqueueActivity)
	finishes := inputsOf[activityio.FinishStepInput](t, dt.rec, finishStepActivity)
	for i, step := range in.Steps {
		require.Equal(t, testDeploymentID, starts[i].DeploymentID)
		require.Equal(t, len(dt.targets), starts[i].Targets)
		require.Equal(t, dt.targets, enqueues[i].Targets)
		require.Equal(t, step.Command, enqueues[i].Step.Command)
		require.Equal(t, "high", enqueues[i].Priority)
		require.Equal(t, activityio.FinishStepInput{
			StepInput: activityio.StepInput{DeploymentID: testDeploymentID, Position: i},
			Status:    "succeeded", Succeeded: len(dt.targets),
		}, finishes[i])
	}
	require.Equal(t, []activityio.FinishDeploymentInput{{DeploymentID: testDeploymentID, Status: domain.DeploymentSucceeded}},
		inputsOf[activityio.FinishDeploymentInput](t, dt.rec, finishDeploymentActivity))

	require.Equal(t, DeploymentResult{
		DeploymentID: testDeploymentID,
		Status:       domain.DeploymentSucceeded,
		Steps: []StepResult{
			{Name: "step-0", Status: "succeeded", Succeeded: 3},
			{Name: "step-1", Status: "succeeded", Succeeded: 3},
			{Name: "step-2", Status: "succeeded", Succeeded: 3},
		},
	}, res)
}

func TestDeploymentReceivesResultsInBatches(t *testing.T) {
	t.Parallel()
	dt := setupDeployment(t)
	dt.targets = []string{"web-1", "web-2", "web-3", "web-4", "web-5"}
	batches := [][]domain.TargetResult{
		succeededResults("web-2", "web-4"),
		nil, // the call timed out with nothing ended
		succeededResults("web-5", "web-1", "web-3"),
	}
	var mu sync.Mutex
	calls := 0
	dt.await = func(context.Context, activityio.AwaitStepResultsInput) (activityio.AwaitStepResultsResult, error) {
		mu.Lock()
		defer mu.Unlock()
		n := calls
		calls++
		if n >= len(batches) {
			return activityio.AwaitStepResultsResult{}, errors.New("awaited after every result arrived")
		}
		return activityio.AwaitStepResultsResult{Results: batches[n]}, nil
	}

	res, err := dt.run(deploymentSpec(dt.targets, 1))

	require.NoError(t, err)
	// Each call names the targets still waited for, in target order.
	require.Equal(t, [][]string{
		{"web-1", "web-2", "web-3", "web-4", "web-5"},
		{"web-1", "web-3", "web-5"},
		{"web-1", "web-3", "web-5"},
	}, waitingOf(t, dt.rec))
	for _, in := range inputsOf[activityio.AwaitStepResultsInput](t, dt.rec, awaitActivity) {
		require.Equal(t, activityio.StepInput{DeploymentID: testDeploymentID, Position: 0}, in.StepInput)
		require.Equal(t, 30*time.Second, in.MaxWait)
	}
	for _, s := range dt.rec.of(awaitActivity) {
		require.Greater(t, s.Options.StartToCloseTimeout, 30*time.Second, "the call outlives its own wait")
		require.Positive(t, s.Options.HeartbeatTimeout)
	}
	require.Equal(t, [][]string{dt.targets}, enqueuedOf(t, dt.rec), "every target is enqueued at once")
	require.Equal(t, []activityio.FinishStepInput{{
		StepInput: activityio.StepInput{DeploymentID: testDeploymentID, Position: 0},
		Status:    "succeeded", Succeeded: 5,
	}}, inputsOf[activityio.FinishStepInput](t, dt.rec, finishStepActivity))
	require.Equal(t, []StepResult{{Name: "step-0", Status: "succeeded", Succeeded: 5}}, res.Steps)
}

func TestDeploymentKeepsMaxParallelTargetsRunning(t *testing.T) {
	t.Parallel()
	dt := setupDeployment(t)
	dt.targets = []string{"web-1", "web-2", "web-3", "web-4", "web-5"}
	in := deploymentSpec(dt.targets, 1)
	in.MaxParallel = 2
	// How many of the waited-for targets each call reports, oldest first.
	answers := []int{1, 2, 1, 1}
	var mu sync.Mutex
	calls := 0
	dt.await = func(_ context.Context, in activityio.AwaitStepResultsInput) (activityio.AwaitStepResultsResult, error) {
		mu.Lock()
		defer mu.Unlock()
		n := calls
		calls++
		if n >= len(answers) {
			return activityio.AwaitStepResultsResult{}, errors.New("awaited after every result arrived")
		}
		return activityio.AwaitStepResultsResult{Results: succeededResults(in.Waiting[:answers[n]]...)}, nil
	}

	res, err := dt.run(in)

	require.NoError(t, err)
	// The first enqueue fills the window; each later one refills what came back.
	require.Equal(t, [][]string{{"web-1", "web-2"}, {"web-3"}, {"web-4", "web-5"}}, enqueuedOf(t, dt.rec))
	// What each call waits for is everything outstanding at that moment.
	waiting := waitingOf(t, dt.rec)
	require.Equal(t, [][]string{{"web-1", "web-2"}, {"web-2", "web-3"}, {"web-4", "web-5"}, {"web-5"}}, waiting)
	for _, w := range waiting {
		require.LessOrEqual(t, len(w), 2, "never more than max_parallel outstanding")
	}
	// Every enqueue is followed by a wait before the next enqueue.
	require.Equal(t, []string{
		startDeploymentActivity, startStepActivity,
		enqueueActivity, awaitActivity,
		enqueueActivity, awaitActivity,
		enqueueActivity, awaitActivity, awaitActivity,
		finishStepActivity, finishDeploymentActivity,
	}, dt.rec.sequence())
	require.Equal(t, []StepResult{{Name: "step-0", Status: "succeeded", Succeeded: 5}}, res.Steps)
}

func TestDeploymentStopsOnFailedTarget(t *testing.T) {
	t.Parallel()
	targets := []string{"web-1", "web-2", "web-3", "web-4", "web-5"}
	// failFirst fails web-1 the first time step 0 reports; everything else succeeds.
	failFirst := func(dt *deploymentTest) {
		var mu sync.Mutex
		failedOnce := false
		dt.await = func(_ context.Context, in activityio.AwaitStepResultsInput) (activityio.AwaitStepResultsResult, error) {
			mu.Lock()
			defer mu.Unlock()
			if in.Position == 0 && !failedOnce {
				failedOnce = true
				return activityio.AwaitStepResultsResult{Results: []domain.TargetResult{failedResult("web-1")}}, nil
			}
			return activityio.AwaitStepResultsResult{Results: succeededResults(in.Waiting...)}, nil
		}
	}

	t.Run("without continue_on_error", func(t *testing.T) {
		t.Parallel()
		dt := setupDeployment(t)
		dt.targets = targets
		in := deploymentSpec(targets, 3)
		in.MaxParallel = 2
		failFirst(dt)

		res, err := dt.run(in)

		var appErr *temporal.ApplicationError
		require.ErrorAs(t, err, &appErr)
		require.Equal(t, activityio.DeploymentFailed, appErr.Type())
		require.True(t, appErr.NonRetryable())
		require.Contains(t, appErr.Error(), "step step-0 failed on 1 of 5 targets")

		// The targets already running finish; no further ones start.
		require.Equal(t, [][]string{{"web-1", "web-2"}}, enqueuedOf(t, dt.rec))
		require.Equal(t, [][]string{{"web-1", "web-2"}, {"web-2"}}, waitingOf(t, dt.rec))
		// Later steps never start and are recorded skipped.
		require.Equal(t, []int{0}, stepPositions(t, dt.rec, startStepActivity))
		stepIn := func(pos int) activityio.StepInput {
			return activityio.StepInput{DeploymentID: testDeploymentID, Position: pos}
		}
		require.Equal(t, []activityio.FinishStepInput{
			{StepInput: stepIn(0), Status: "failed", Succeeded: 1, Failed: 1, Skipped: 3},
			{StepInput: stepIn(1), Status: "skipped", Skipped: 5},
			{StepInput: stepIn(2), Status: "skipped", Skipped: 5},
		}, inputsOf[activityio.FinishStepInput](t, dt.rec, finishStepActivity))
		finish := inputsOf[activityio.FinishDeploymentInput](t, dt.rec, finishDeploymentActivity)
		require.Len(t, finish, 1)
		require.Equal(t, domain.DeploymentFailed, finish[0].Status)
		require.Equal(t, "step step-0 failed on 1 of 5 targets", finish[0].Reason)
		require.Empty(t, dt.rec.of(cancelWorkActivity))

		// The failure carries the result.
		require.Equal(t, domain.DeploymentFailed, res.Status)
		require.Equal(t, []StepResult{
			{Name: "step-0", Status: "failed", Succeeded: 1, Failed: 1, Skipped: 3, FailedTargets: []domain.TargetResult{failedResult("web-1")}},
			{Name: "step-1", Status: "skipped", Skipped: 5},
			{Name: "step-2", Status: "skipped", Skipped: 5},
		}, res.Steps)
	})

	t.Run("with continue_on_error", func(t *testing.T) {
		t.Parallel()
		dt := setupDeployment(t)
		dt.targets = targets
		in := deploymentSpec(targets, 3)
		in.MaxParallel = 2
		in.Steps[0].ContinueOnError = true
		failFirst(dt)

		res, err := dt.run(in)

		require.NoError(t, err)
		// The failed target's slot is refilled like any other.
		require.Equal(t, []string{"web-1", "web-2", "web-3", "web-4", "web-5"}, joinBatches(enqueuedOf(t, dt.rec)[:3]))
		require.Equal(t, []int{0, 1, 2}, stepPositions(t, dt.rec, startStepActivity))
		finishes := inputsOf[activityio.FinishStepInput](t, dt.rec, finishStepActivity)
		require.Len(t, finishes, 3)
		require.Equal(t, "failed", finishes[0].Status)
		require.Equal(t, 4, finishes[0].Succeeded)
		require.Equal(t, 1, finishes[0].Failed)
		require.Equal(t, "succeeded", finishes[1].Status)
		require.Equal(t, "succeeded", finishes[2].Status)
		require.Equal(t, []activityio.FinishDeploymentInput{{DeploymentID: testDeploymentID, Status: domain.DeploymentSucceeded}},
			inputsOf[activityio.FinishDeploymentInput](t, dt.rec, finishDeploymentActivity))
		require.Equal(t, domain.DeploymentSucceeded, res.Status)
		require.Equal(t, []domain.TargetResult{failedResult("web-1")}, res.Steps[0].FailedTargets)
	})
}

func TestDeploymentCancelledWhileAwaitingResults(t *testing.T) {
	t.Parallel()
	dt := setupDeployment(t)
	in := deploymentSpec(dt.targets, 3)
	// The test environment resolves a cancelled activity without cancelling its
	// context, so the wait blocks until the test ends and the listener sees the
	// cancellation.
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	var mu sync.Mutex
	var cancelled []string
	dt.env.SetOnActivityCanceledListener(func(info *activity.Info) {
		mu.Lock()
		defer mu.Unlock()
		cancelled = append(cancelled, info.ActivityType.Name)
	})
	dt.await = func(ctx context.Context, in activityio.AwaitStepResultsInput) (activityio.AwaitStepResultsResult, error) {
		if in.Position == 0 {
			return activityio.AwaitStepResultsResult{Results: succeededResults(in.Waiting...)}, nil
		}
		// Step 1 is running when the deployment is cancelled.
		dt.env.CancelWorkflow()
		select {
		case <-ctx.Done():
		case <-release:
		}
		return activityio.AwaitStepResultsResult{}, errors.New("the wait outlived the deployment")
	}

	_, err := dt.run(in)

	require.Error(t, err)
	require.True(t, temporal.IsCanceledError(err), "want cancelled, got %v", err)
	var appErr *temporal.ApplicationError
	require.False(t, errors.As(err, &appErr), "cancellation is not a failure: %v", err)
	mu.Lock()
	cancelledActivities := slices.Clone(cancelled)
	mu.Unlock()
	require.Equal(t, []string{awaitActivity}, cancelledActivities, "the running wait is cancelled")

	require.Equal(t, []string{
		startDeploymentActivity,
		startStepActivity, enqueueActivity, awaitActivity, finishStepActivity, // step 0
		startStepActivity, enqueueActivity, awaitActivity, // step 1, cancelled
		cancelWorkActivity, finishStepActivity, finishStepActivity, finishDeploymentActivity,
	}, dt.rec.sequence())
	require.Equal(t, []activityio.CancelDeploymentInput{{DeploymentID: testDeploymentID}}, inputsOf[activityio.CancelDeploymentInput](t, dt.rec, cancelWorkActivity))
	stepIn := func(pos int) activityio.StepInput {
		return activityio.StepInput{DeploymentID: testDeploymentID, Position: pos}
	}
	require.Equal(t, []activityio.FinishStepInput{
		{StepInput: stepIn(0), Status: "succeeded", Succeeded: 3},
		{StepInput: stepIn(1), Status: "cancelled"},
		{StepInput: stepIn(2), Status: "skipped", Skipped: 3},
	}, inputsOf[activityio.FinishStepInput](t, dt.rec, finishStepActivity))
	require.Equal(t, []activityio.FinishDeploymentInput{{DeploymentID: testDeploymentID, Status: domain.DeploymentCancelled, Reason: "cancelled"}},
		inputsOf[activityio.FinishDeploymentInput](t, dt.rec, finishDeploymentActivity))

	upserts := dt.searchAttributeUpserts()
	require.NotEmpty(t, upserts)
	status, ok := upserts[len(upserts)-1].Attributes.GetKeyword(DeploymentStatusSearchAttribute)
	require.True(t, ok)
	require.Equal(t, domain.DeploymentCancelled, status)
}

func TestDeploymentInvalidSpecFailsAtOnce(t *testing.T) {
	t.Parallel()
	const problem = "invalid deployment spec: steps: at least one step is required"

	for name, specErr := range map[string]error{
		"non-retryable error": temporal.NewNonRetryableApplicationError(problem, activityio.InvalidSpec, nil),
		// Retryable as returned: the retry policy is what stops it.
		"error of a non-retryable type": temporal.NewApplicationError(problem, activityio.InvalidSpec),
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dt := setupDeployment(t)
			dt.start = func(int, activityio.StartDeploymentInput) (activityio.StartDeploymentResult, error) {
				return activityio.StartDeploymentResult{}, specErr
			}
			attempts := 0
			dt.env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, _ converter.EncodedValues) {
				if info.ActivityType.Name == startDeploymentActivity {
					attempts++
				}
			})

			_, err := dt.run(spec.Deployment{Name: "web-rollout", Targets: []string{"web-1"}})

			var appErr *temporal.ApplicationError
			require.ErrorAs(t, err, &appErr)
			require.Equal(t, activityio.InvalidSpec, appErr.Type())
			require.Contains(t, appErr.Error(), problem)
			require.Equal(t, 1, attempts, "an invalid spec is not retried")
			require.Equal(t, []string{startDeploymentActivity}, dt.rec.sequence(), "nothing else runs")
			require.Equal(t, time.Duration(0), dt.env.Now().Sub(testStart))
		})
	}

	t.Run("a transient error is retried", func(t *testing.T) {
		t.Parallel()
		dt := setupDeployment(t)
		dt.start = func(n int, _ activityio.StartDeploymentInput) (activityio.StartDeploymentResult, error) {
			if n == 0 {
				return activityio.StartDeploymentResult{}, errors.New("connecting to database: connection refused")
			}
			return activityio.StartDeploymentResult{DeploymentID: testDeploymentID, Targets: dt.targets}, nil
		}
		attempts := 0
		dt.env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, _ converter.EncodedValues) {
			if info.ActivityType.Name == startDeploymentActivity {
				attempts++
			}
		})

		_, err := dt.run(deploymentSpec(dt.targets, 1))

		require.NoError(t, err)
		require.Equal(t, 2, attempts)
	})
}

func TestDeploymentSearchAttributes(t *testing.T) {
	t.Parallel()

	keyword := func(t *testing.T, sa temporal.SearchAttributes, key temporal.SearchAttributeKeyKeyword) string {
		t.Helper()
		v, ok := sa.GetKeyword(key)
		require.True(t, ok, "%s is set", key.GetName())
		return v
	}

	t.Run("set after start, final status at the end", func(t *testing.T) {
		t.Parallel()
		dt := setupDeployment(t)
		in := deploymentSpec(dt.targets, 2)
		in.Priority = "" // the default applies

		_, err := dt.run(in)

		require.NoError(t, err)
		upserts := dt.searchAttributeUpserts()
		require.Len(t, upserts, 2)
		first := upserts[0]
		require.Equal(t, 1, first.Scheduled, "set once StartDeployment named the deployment, before any step")
		require.Equal(t, testDeploymentID, keyword(t, first.Attributes, DeploymentIDSearchAttribute))
		require.Equal(t, "web-rollout", keyword(t, first.Attributes, DeploymentNameSearchAttribute))
		require.Equal(t, spec.DefaultPriority, keyword(t, first.Attributes, DeploymentPrioritySearchAttribute))
		require.Equal(t, domain.DeploymentRunning, keyword(t, first.Attributes, DeploymentStatusSearchAttribute))

		last := upserts[1]
		require.Equal(t, len(dt.rec.all()), last.Scheduled, "set after FinishDeployment")
		require.Equal(t, domain.DeploymentSucceeded, keyword(t, last.Attributes, DeploymentStatusSearchAttribute))
	})

	t.Run("final status is the recorded one", func(t *testing.T) {
		t.Parallel()
		dt := setupDeployment(t)
		// A dead Thorax failed the deployment meanwhile: it stays failed.
		dt.finish = func(activityio.FinishDeploymentInput) (string, error) { return domain.DeploymentFailed, nil }

		res, err := dt.run(deploymentSpec(dt.targets, 1))

		var appErr *temporal.ApplicationError
		require.ErrorAs(t, err, &appErr)
		require.Equal(t, activityio.DeploymentFailed, appErr.Type())
		require.Equal(t, domain.DeploymentFailed, res.Status)
		upserts := dt.searchAttributeUpserts()
		require.NotEmpty(t, upserts)
		require.Equal(t, domain.DeploymentFailed, keyword(t, upserts[len(upserts)-1].Attributes, DeploymentStatusSearchAttribute))
	})
}

// cliInput is a spec as `temporal workflow start --input` passes it.
const cliInput = `{
  "name": "web-rollout",
  "priority": "high",
  "targets": ["web-1", "web-2"],
  "max_parallel": 1,
  "steps": [
    {"name": "fetch", "command": "git -C /srv/web pull", "timeout": "90s"},
    {"name": "restart", "command": "systemctl restart web", "continue_on_error": true,
     "env": {"APP_ENV": "production"}, "working_dir": "/srv/web"}
  ]
}`

func TestDeploymentInputIsPlainSpec(t *testing.T) {
	t.Parallel()
	var want spec.Deployment
	require.NoError(t, json.Unmarshal([]byte(cliInput), &want))

	for name, in := range map[string]any{
		"decoded spec": want,
		// The JSON itself, as the CLI sends it: a json/plain payload of these bytes.
		"raw JSON": json.RawMessage(cliInput),
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dt := setupDeployment(t)
			dt.targets = want.Targets

			res, err := dt.run(in)

			require.NoError(t, err)
			starts := inputsOf[activityio.StartDeploymentInput](t, dt.rec, startDeploymentActivity)
			require.Equal(t, []activityio.StartDeploymentInput{{WorkflowID: DeploymentWorkflowID(testDeploymentID), Spec: want}}, starts)

			enqueues := inputsOf[activityio.EnqueueStepTargetsInput](t, dt.rec, enqueueActivity)
			require.Len(t, enqueues, 4, "max_parallel 1: one target at a time")
			for _, e := range enqueues {
				require.Len(t, e.Targets, 1)
				require.Equal(t, "high", e.Priority)
			}
			restart := enqueues[3].Step
			require.Equal(t, "systemctl restart web", restart.Command)
			require.Equal(t, map[string]string{"APP_ENV": "production"}, restart.Env)
			require.Equal(t, "/srv/web", restart.WorkingDir)
			require.True(t, restart.ContinueOnError)
			require.Equal(t, 90*time.Second, enqueues[0].Step.TimeoutDuration())
			require.Equal(t, spec.DefaultStepTimeout, restart.TimeoutDuration())

			require.Equal(t, []StepResult{
				{Name: "fetch", Status: "succeeded", Succeeded: 2},
				{Name: "restart", Status: "succeeded", Succeeded: 2},
			}, res.Steps)
		})
	}
}

// A step that fails with an activity error is finished failed, its outstanding work
// cancelled, and the later steps skipped: nothing is left running.
func TestDeploymentStepActivityErrorFinishesTheStep(t *testing.T) {
	t.Parallel()
	dt := setupDeployment(t)
	dt.enqueue = func(in activityio.EnqueueStepTargetsInput) error {
		if in.Position == 1 {
			return temporal.NewNonRetryableApplicationError("requests[0].target: unknown target", activityio.InvalidSpec, nil)
		}
		return nil
	}
	_, err := dt.run(deploymentSpec(dt.targets, 3))
	require.Error(t, err)
	require.Len(t, inputsOf[activityio.CancelDeploymentInput](t, dt.rec, cancelWorkActivity), 1, "outstanding work is cancelled")
	finishes := inputsOf[activityio.FinishStepInput](t, dt.rec, "FinishStep")
	byPos := map[int]string{}
	for _, f := range finishes {
		byPos[f.Position] = f.Status
	}
	require.Equal(t, map[int]string{0: "succeeded", 1: "failed", 2: "skipped"}, byPos)
	ends := inputsOf[activityio.FinishDeploymentInput](t, dt.rec, finishDeploymentActivity)
	require.Len(t, ends, 1)
	require.Equal(t, "failed", ends[0].Status)
}

// A cancel that arrives while the deployment is being recorded still ends it
// cancelled, with every step skipped.
func TestDeploymentCancelledWhileStarting(t *testing.T) {
	t.Parallel()
	dt := setupDeployment(t)
	dt.start = func(int, activityio.StartDeploymentInput) (activityio.StartDeploymentResult, error) {
		dt.env.CancelWorkflow() // arrives while the deployment is being recorded
		return activityio.StartDeploymentResult{DeploymentID: testDeploymentID, Targets: dt.targets}, nil
	}
	_, err := dt.run(deploymentSpec(dt.targets, 2))
	require.True(t, temporal.IsCanceledError(err), "%v", err)
	ends := inputsOf[activityio.FinishDeploymentInput](t, dt.rec, finishDeploymentActivity)
	require.Len(t, ends, 1)
	require.Equal(t, "cancelled", ends[0].Status)
	require.Empty(t, inputsOf[activityio.StartStepInput](t, dt.rec, "StartStep"), "no step starts after a cancel")
}
