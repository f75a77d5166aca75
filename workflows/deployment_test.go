package workflows

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/mantis-deploy/mantis/internal/contract/activityio"
	"github.com/mantis-deploy/mantis/internal/contract/spec"
	"github.com/mantis-deploy/mantis/internal/domain"
)

// Activity type names as the Deployment workflow schedules them.
const (
	startDeploymentActivity  = "StartDeployment"
	advanceActivity          = "AdvanceStep"
	finishStepActivity       = "FinishStep"
	skipStepsActivity        = "SkipSteps"
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

// failedResult reports target as having failed its step with exit code 1.
func failedResult(target string) domain.TargetResult {
	code := 1
	return domain.TargetResult{Target: target, Status: "failed", ExitCode: &code, Error: "exit status 1"}
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
			wt := setupWindow(t)
			// A retry would succeed and run the deployment, which the checks below see.
			start := wt.start
			wt.start = func(n int, in activityio.StartDeploymentInput) (activityio.StartDeploymentResult, error) {
				if n == 0 {
					return activityio.StartDeploymentResult{}, specErr
				}
				return start(n, in)
			}

			_, err := wt.run(DeploymentInput{Deployment: spec.Deployment{Name: "web-rollout", Targets: []string{"web-1"}}})

			var appErr *temporal.ApplicationError
			require.ErrorAs(t, err, &appErr)
			require.Equal(t, activityio.InvalidSpec, appErr.Type())
			require.Contains(t, appErr.Error(), problem)
			require.Equal(t, 1, wt.startAttempts(), "an invalid spec is not retried")
			require.Equal(t, []string{startDeploymentActivity}, wt.rec.sequence(), "nothing else runs")
			require.Empty(t, wt.searchAttributeUpserts(), "a deployment that never started sets no search attribute")
			require.Equal(t, time.Duration(0), wt.env.Now().Sub(testStart))
		})
	}

	t.Run("a transient error is retried", func(t *testing.T) {
		t.Parallel()
		wt := setupWindow(t)
		start := wt.start
		wt.start = func(n int, in activityio.StartDeploymentInput) (activityio.StartDeploymentResult, error) {
			if n == 0 {
				return activityio.StartDeploymentResult{}, errors.New("connecting to database: connection refused")
			}
			return start(n, in)
		}

		_, err := wt.run(DeploymentInput{Deployment: deploymentSpec([]string{"web-1"}, 1)})

		require.NoError(t, err)
		require.Equal(t, 2, wt.startAttempts())
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
		wt := setupWindow(t)
		in := deploymentSpec([]string{"web-1"}, 2)
		in.Priority = "" // the default applies

		_, err := wt.run(DeploymentInput{Deployment: in})

		require.NoError(t, err)
		upserts := wt.searchAttributeUpserts()
		require.Len(t, upserts, 2)
		first := upserts[0]
		require.Equal(t, 1, first.Scheduled, "set once StartDeployment named the deployment, before any step")
		require.Equal(t, testDeploymentID, keyword(t, first.Attributes, DeploymentIDSearchAttribute))
		require.Equal(t, "web-rollout", keyword(t, first.Attributes, DeploymentNameSearchAttribute))
		require.Equal(t, spec.DefaultPriority, keyword(t, first.Attributes, DeploymentPrioritySearchAttribute))
		require.Equal(t, domain.DeploymentRunning, keyword(t, first.Attributes, DeploymentStatusSearchAttribute))

		last := upserts[1]
		require.Equal(t, len(wt.rec.all()), last.Scheduled, "set after EndDeployment")
		require.Equal(t, finishDeploymentActivity, wt.rec.sequence()[last.Scheduled-1])
		require.Equal(t, domain.DeploymentSucceeded, keyword(t, last.Attributes, DeploymentStatusSearchAttribute))
	})

	t.Run("final status is the recorded one", func(t *testing.T) {
		t.Parallel()
		wt := setupWindow(t)
		// A dead Thorax failed the deployment meanwhile: it stays failed.
		wt.end = func(activityio.FinishDeploymentInput) (string, error) { return domain.DeploymentFailed, nil }

		res, err := wt.run(DeploymentInput{Deployment: deploymentSpec([]string{"web-1"}, 1)})

		var appErr *temporal.ApplicationError
		require.ErrorAs(t, err, &appErr)
		require.Equal(t, activityio.DeploymentFailed, appErr.Type())
		require.Equal(t, domain.DeploymentFailed, res.Status)
		upserts := wt.searchAttributeUpserts()
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
			wt := setupWindow(t)
			wt.targets = len(want.Targets)

			res, err := wt.run(in)

			require.NoError(t, err)
			// The whole spec is recorded with the deployment, which runs each step's
			// command on the database side.
			starts := inputsOf[activityio.StartDeploymentInput](t, wt.rec, startDeploymentActivity)
			require.Equal(t, []activityio.StartDeploymentInput{{WorkflowID: DeploymentWorkflowID(testDeploymentID), Spec: want, CountOnly: true}}, starts)
			recorded := starts[0].Spec
			require.Equal(t, "high", recorded.Priority)
			require.Equal(t, 1, recorded.MaxParallel)
			require.Equal(t, []string{"web-1", "web-2"}, recorded.Targets)
			restart := recorded.Steps[1]
			require.Equal(t, "systemctl restart web", restart.Command)
			require.Equal(t, map[string]string{"APP_ENV": "production"}, restart.Env)
			require.Equal(t, "/srv/web", restart.WorkingDir)
			require.True(t, restart.ContinueOnError)
			require.Equal(t, 90*time.Second, recorded.Steps[0].TimeoutDuration())
			require.Equal(t, spec.DefaultStepTimeout, restart.TimeoutDuration())

			require.Equal(t, []int{0, 1}, advancedPositions(t, wt.rec))
			require.Equal(t, []StepResult{
				{Name: "fetch", Status: "succeeded", Succeeded: 2},
				{Name: "restart", Status: "succeeded", Succeeded: 2},
			}, res.Steps)
		})
	}
}

// A failed step with continue_on_error does not stop the deployment: the later steps
// run, and its failure stays in the step's summary.
func TestDeploymentContinuesPastAFailedStepWithContinueOnError(t *testing.T) {
	t.Parallel()
	wt := setupWindow(t)
	failed := []domain.TargetResult{failedResult("web-2")}
	wt.advance = func(_ context.Context, _ int, in activityio.AdvanceStepInput) (activityio.AdvanceStepResult, error) {
		if in.Position == 0 {
			return domain.StepProgress{Total: 3, Enqueued: 3, Succeeded: 2, Failed: 1, Done: true, Status: "failed", FailedTargets: failed}, nil
		}
		return domain.StepProgress{Total: 3, Enqueued: 3, Succeeded: 3, Done: true, Status: "succeeded"}, nil
	}
	in := deploymentSpec([]string{"web-1"}, 3)
	in.Steps[0].ContinueOnError = true

	res, err := wt.run(DeploymentInput{Deployment: in})

	require.NoError(t, err)
	require.Equal(t, domain.DeploymentSucceeded, res.Status)
	require.Equal(t, []StepResult{
		{Name: "step-0", Status: "failed", Succeeded: 2, Failed: 1, FailedTargets: failed},
		{Name: "step-1", Status: "succeeded", Succeeded: 3},
		{Name: "step-2", Status: "succeeded", Succeeded: 3},
	}, res.Steps)
	require.Equal(t, []int{0, 1, 2}, advancedPositions(t, wt.rec))
	require.Empty(t, wt.rec.of(skipStepsActivity))
	require.Equal(t, []activityio.FinishDeploymentInput{{DeploymentID: testDeploymentID, Status: domain.DeploymentSucceeded}},
		inputsOf[activityio.FinishDeploymentInput](t, wt.rec, finishDeploymentActivity))
}

// A step that fails with an activity error is finished failed, its outstanding work
// cancelled, and the later steps skipped: nothing is left running.
func TestDeploymentStepActivityErrorFinishesTheStep(t *testing.T) {
	t.Parallel()
	wt := setupWindow(t)
	wt.advance = func(_ context.Context, _ int, in activityio.AdvanceStepInput) (activityio.AdvanceStepResult, error) {
		if in.Position == 1 {
			return domain.StepProgress{}, temporal.NewNonRetryableApplicationError("requests[0].target: unknown target", activityio.InvalidSpec, nil)
		}
		return domain.StepProgress{Total: 3, Enqueued: 3, Succeeded: 3, Done: true, Status: "succeeded"}, nil
	}

	res, err := wt.run(DeploymentInput{Deployment: deploymentSpec([]string{"web-1"}, 3)})

	var appErr *temporal.ApplicationError
	require.ErrorAs(t, err, &appErr)
	require.Equal(t, activityio.DeploymentFailed, appErr.Type())
	require.Equal(t, []string{startDeploymentActivity, advanceActivity, advanceActivity,
		cancelWorkActivity, finishStepActivity, skipStepsActivity, finishDeploymentActivity}, wt.rec.sequence())
	require.Equal(t, []activityio.CancelDeploymentInput{{DeploymentID: testDeploymentID}},
		inputsOf[activityio.CancelDeploymentInput](t, wt.rec, cancelWorkActivity), "outstanding work is cancelled")
	require.Equal(t, []activityio.FinishStepInput{{
		StepInput: activityio.StepInput{DeploymentID: testDeploymentID, Position: 1}, Status: "failed", Skipped: 3,
	}}, inputsOf[activityio.FinishStepInput](t, wt.rec, finishStepActivity))
	require.Equal(t, []activityio.SkipStepsInput{{DeploymentID: testDeploymentID, From: 2}},
		inputsOf[activityio.SkipStepsInput](t, wt.rec, skipStepsActivity))
	ends := inputsOf[activityio.FinishDeploymentInput](t, wt.rec, finishDeploymentActivity)
	require.Len(t, ends, 1)
	require.Equal(t, domain.DeploymentFailed, ends[0].Status)
	require.Contains(t, ends[0].Reason, "step step-1: ")
	require.Contains(t, ends[0].Reason, "unknown target")
	require.Equal(t, []StepResult{
		{Name: "step-0", Status: "succeeded", Succeeded: 3},
		{Name: "step-1", Status: "failed", Skipped: 3},
		{Name: "step-2", Status: "skipped", Skipped: 3},
	}, res.Steps)
}

// A cancel that arrives while the deployment is being recorded still ends it
// cancelled, with every step skipped.
func TestDeploymentCancelledWhileStarting(t *testing.T) {
	t.Parallel()
	wt := setupWindow(t)
	start := wt.start
	wt.start = func(n int, in activityio.StartDeploymentInput) (activityio.StartDeploymentResult, error) {
		wt.env.CancelWorkflow() // arrives while the deployment is being recorded
		return start(n, in)
	}

	_, err := wt.run(DeploymentInput{Deployment: deploymentSpec([]string{"web-1"}, 2)})

	require.True(t, temporal.IsCanceledError(err), "%v", err)
	require.Equal(t, []string{startDeploymentActivity, cancelWorkActivity, skipStepsActivity, finishDeploymentActivity},
		wt.rec.sequence(), "no step runs after a cancel")
	require.Equal(t, []activityio.SkipStepsInput{{DeploymentID: testDeploymentID, From: 0}},
		inputsOf[activityio.SkipStepsInput](t, wt.rec, skipStepsActivity))
	require.Equal(t, []activityio.FinishDeploymentInput{{DeploymentID: testDeploymentID, Status: domain.DeploymentCancelled, Reason: "cancelled"}},
		inputsOf[activityio.FinishDeploymentInput](t, wt.rec, finishDeploymentActivity))
	upserts := wt.searchAttributeUpserts()
	require.NotEmpty(t, upserts)
	status, ok := upserts[len(upserts)-1].Attributes.GetKeyword(DeploymentStatusSearchAttribute)
	require.True(t, ok)
	require.Equal(t, domain.DeploymentCancelled, status)
}
