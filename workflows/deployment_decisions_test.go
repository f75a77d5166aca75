package workflows

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/mantis-deploy/mantis/activities"
	"github.com/mantis-deploy/mantis/internal/contract/activityio"
	"github.com/mantis-deploy/mantis/internal/contract/api"
	"github.com/mantis-deploy/mantis/internal/contract/events"
	"github.com/mantis-deploy/mantis/internal/contract/spec"
	"github.com/mantis-deploy/mantis/internal/domain"
)

// Activity type names of human decisions.
const (
	recordDecisionActivity = "RecordDecision"
	setWaitingActivity     = "SetWaiting"
	retryStepActivity      = "RetryStepRound"
)

// decisionTest is a windowed deployment test whose decision activities are mocked.
type decisionTest struct {
	*windowTest
	// results collects what each Update answered or why it was refused, by its id.
	results map[string]updateResult
}

// updateResult is how one Update ended.
type updateResult struct {
	decision api.Decision
	err      error
}

func setupDecisions(t *testing.T) *decisionTest {
	t.Helper()
	wt := setupWindow(t)
	var a *activities.Activities
	wt.env.OnActivity(a.StartStep, mock.Anything, mock.Anything).Return(nil)
	wt.env.OnActivity(a.SetWaiting, mock.Anything, mock.Anything).Return(nil)
	wt.env.OnActivity(a.RetryStepRound, mock.Anything, mock.Anything).Return(activityio.RetryStepRoundResult{Targets: 1}, nil)
	wt.env.OnActivity(a.RecordDecision, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activityio.RecordDecisionInput) (api.Decision, error) {
			return api.Decision{Decision: in.Decision, By: in.By, At: in.At, Step: in.Step, Comment: in.Comment}, nil
		})
	return &decisionTest{windowTest: wt, results: map[string]updateResult{}}
}

// decideAt sends the decision Update, as by, after delay of workflow time.
func (dt *decisionTest) decideAt(delay time.Duration, id, decision, by string) {
	dt.env.RegisterDelayedCallback(func() {
		dt.env.UpdateWorkflow(decision, id, &testsuite.TestUpdateCallback{
			OnAccept: func() {},
			OnReject: func(err error) { dt.results[id] = updateResult{err: err} },
			OnComplete: func(v any, err error) {
				d, _ := v.(api.Decision)
				dt.results[id] = updateResult{decision: d, err: err}
			},
		}, DecisionInput{By: by, Comment: "from " + id})
	}, delay)
}

// approvalSpec is a deployment whose step 0 is an approval by approvers, then one
// command step.
func approvalSpec(approvers []string, timeout, onTimeout string) spec.Deployment {
	d := deploymentSpec([]string{"web-1"}, 2)
	d.Steps[0] = spec.Step{Name: "go-ahead", Kind: spec.StepKindApproval, Approvers: approvers, Timeout: timeout, OnTimeout: onTimeout}
	return d
}

func TestApprovalStepApprovedRunsTheNextStep(t *testing.T) {
	t.Parallel()
	dt := setupDecisions(t)
	dt.decideAt(time.Minute, "u1", api.DecisionApprove, "alice")
	res, err := dt.run(DeploymentInput{Deployment: approvalSpec([]string{"alice"}, "", "")})
	require.NoError(t, err)
	require.Equal(t, domain.DeploymentSucceeded, res.Status)
	require.Equal(t, StepResult{Name: "go-ahead", Status: domain.StepSucceeded}, res.Steps[0])
	require.NoError(t, dt.results["u1"].err)
	require.Equal(t, "alice", dt.results["u1"].decision.By)
	require.Equal(t, []int{1}, advancedPositions(t, dt.rec), "the approval runs no command; the next step runs after it")
	waits := inputsOf[activityio.SetWaitingInput](t, dt.rec, setWaitingActivity)
	require.Equal(t, events.WaitApproval, waits[0].Waiting.Kind)
	require.Equal(t, []string{"alice"}, waits[0].Waiting.Approvers)
	require.Equal(t, testStart.Add(spec.DefaultApprovalTimeout), *waits[0].Waiting.Deadline)
	recs := inputsOf[activityio.RecordDecisionInput](t, dt.rec, recordDecisionActivity)
	require.Len(t, recs, 1)
	require.Equal(t, testStart.Add(time.Minute), recs[0].At, "the decision is recorded with when")
	require.Equal(t, "u1", recs[0].UpdateID)
}

func TestApprovalStepRejectedFailsTheDeployment(t *testing.T) {
	t.Parallel()
	dt := setupDecisions(t)
	dt.decideAt(time.Minute, "u1", api.DecisionReject, "bob")
	res, err := dt.run(DeploymentInput{Deployment: approvalSpec(nil, "", "")})
	require.Error(t, err)
	require.Equal(t, domain.DeploymentFailed, res.Status)
	require.Empty(t, dt.rec.of(advanceActivity), "nothing runs after a rejection")
	finish := inputsOf[activityio.FinishDeploymentInput](t, dt.rec, finishDeploymentActivity)[0]
	require.Contains(t, finish.Reason, "step go-ahead was rejected by bob: from u1")
}

func TestApprovalStepTimesOut(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ onTimeout, status string }{
		{"", domain.DeploymentFailed}, {spec.OnTimeoutApprove, domain.DeploymentSucceeded},
	} {
		t.Run("on_timeout "+c.onTimeout, func(t *testing.T) {
			t.Parallel()
			dt := setupDecisions(t)
			res, _ := dt.run(DeploymentInput{Deployment: approvalSpec(nil, "2h", c.onTimeout)})
			require.Equal(t, c.status, res.Status)
			recs := inputsOf[activityio.RecordDecisionInput](t, dt.rec, recordDecisionActivity)
			require.Len(t, recs, 1)
			require.Equal(t, api.TimeoutDecider, recs[0].By)
			require.Equal(t, testStart.Add(2*time.Hour), recs[0].At, "decided when the timeout passed")
		})
	}
}

func TestDecisionValidatorRefusesNonApproverAndUnexpectedDecisions(t *testing.T) {
	t.Parallel()
	dt := setupDecisions(t)
	dt.decideAt(time.Minute, "mallory", api.DecisionApprove, "mallory")
	dt.decideAt(2*time.Minute, "retry", api.DecisionRetry, "alice")
	dt.decideAt(3*time.Minute, "resume", api.DecisionResume, "alice")
	dt.decideAt(4*time.Minute, "empty", api.DecisionApprove, "")
	var during DeploymentProgressView
	dt.env.RegisterDelayedCallback(func() {
		v, err := dt.env.QueryWorkflow(ProgressQuery)
		require.NoError(t, err)
		require.NoError(t, v.Get(&during))
	}, 5*time.Minute)
	dt.decideAt(6*time.Minute, "alice", api.DecisionApprove, "alice")
	res, err := dt.run(DeploymentInput{Deployment: approvalSpec([]string{"alice", "carol"}, "", "")})
	require.NoError(t, err)
	require.Equal(t, domain.DeploymentSucceeded, res.Status)
	requireRefused(t, dt.results["mallory"].err, DecisionNotApprover, `"mallory" is not among the approvers of step 0`)
	requireRefused(t, dt.results["retry"].err, DecisionNotExpected, "no failed step is waiting")
	requireRefused(t, dt.results["resume"].err, DecisionNotExpected, "not paused")
	requireRefused(t, dt.results["empty"].err, DecisionInvalid, "by:")
	require.NoError(t, dt.results["alice"].err)
	recs := inputsOf[activityio.RecordDecisionInput](t, dt.rec, recordDecisionActivity)
	require.Len(t, recs, 1, "a refused Update records nothing")
	require.Equal(t, events.WaitApproval, during.Waiting.Kind, "the progress query shows the wait")
}

// requireRefused fails unless err is an application error of type typ saying text.
func requireRefused(t *testing.T, err error, typ, text string) {
	t.Helper()
	var appErr *temporal.ApplicationError
	require.True(t, errors.As(err, &appErr), "want a refusal, got %v", err)
	require.Equal(t, typ, appErr.Type())
	require.Contains(t, appErr.Error(), text)
}

// askingSpec is a deployment whose step 0 asks on failure, then one more step.
func askingSpec() spec.Deployment {
	d := deploymentSpec([]string{"web-1", "web-2", "web-3"}, 2)
	d.Steps[0].OnFailure = spec.OnFailureAsk
	return d
}

// failOnceThenSucceed answers step 0's first call with one failed target, every
// other call with the step succeeded.
func failOnceThenSucceed(_ context.Context, n int, in activityio.AdvanceStepInput) (activityio.AdvanceStepResult, error) {
	if n == 0 {
		return domain.StepProgress{Total: 3, Enqueued: 3, Succeeded: 2, Failed: 1, Done: true, Status: domain.StepFailed,
			FailedTargets: []domain.TargetResult{{Target: "web-2", Status: domain.CommandFailed}}}, nil
	}
	return domain.StepProgress{Total: 3, Enqueued: 3, Succeeded: 3, Done: true, Status: domain.StepSucceeded}, nil
}

func TestFailedStepThatAsksIsRetried(t *testing.T) {
	t.Parallel()
	dt := setupDecisions(t)
	dt.advance = failOnceThenSucceed
	dt.decideAt(time.Minute, "u1", api.DecisionRetry, "alice")
	res, err := dt.run(DeploymentInput{Deployment: askingSpec()})
	require.NoError(t, err)
	require.Equal(t, domain.DeploymentSucceeded, res.Status)
	require.Equal(t, []int{0, 0, 1}, advancedPositions(t, dt.rec), "the step runs again, then the next")
	retries := inputsOf[activityio.RetryStepInput](t, dt.rec, retryStepActivity)
	require.Equal(t, []activityio.RetryStepInput{{StepInput: activityio.StepInput{DeploymentID: testDeploymentID, Position: 0}, Round: 1}}, retries)
	waits := inputsOf[activityio.SetWaitingInput](t, dt.rec, setWaitingActivity)
	require.Equal(t, events.WaitOnFailure, waits[0].Waiting.Kind)
	require.Equal(t, "step-0", waits[0].Waiting.Step)
}

func TestFailedStepThatAsksIsSkipped(t *testing.T) {
	t.Parallel()
	dt := setupDecisions(t)
	dt.advance = failOnceThenSucceed
	dt.decideAt(time.Minute, "u1", api.DecisionSkip, "alice")
	res, err := dt.run(DeploymentInput{Deployment: askingSpec()})
	require.NoError(t, err)
	require.Equal(t, domain.DeploymentSucceeded, res.Status)
	require.Equal(t, domain.StepFailed, res.Steps[0].Status, "the skipped step keeps its failure")
	require.Equal(t, []int{0, 1}, advancedPositions(t, dt.rec), "the step is not run again; the next one runs")
	require.Empty(t, dt.rec.of(retryStepActivity))
}

func TestFailedStepThatAsksIsAborted(t *testing.T) {
	t.Parallel()
	dt := setupDecisions(t)
	dt.advance = failOnceThenSucceed
	dt.decideAt(time.Minute, "u1", api.DecisionAbort, "alice")
	res, err := dt.run(DeploymentInput{Deployment: askingSpec()})
	require.Error(t, err)
	require.Equal(t, domain.DeploymentFailed, res.Status)
	require.Equal(t, []int{0}, advancedPositions(t, dt.rec))
	finish := inputsOf[activityio.FinishDeploymentInput](t, dt.rec, finishDeploymentActivity)[0]
	require.Contains(t, finish.Reason, "alice aborted the deployment: from u1")
}

// A pause taken while a step runs holds across continue-as-new: the next run waits at
// the step's end until resume reaches it by the workflow id.
func TestPauseHoldsAcrossContinueAsNewUntilResume(t *testing.T) {
	t.Parallel()
	dt := setupDecisions(t)
	dt.advance = func(_ context.Context, n int, _ activityio.AdvanceStepInput) (activityio.AdvanceStepResult, error) {
		if n == 1 { // step 0 is running when the pause comes
			dt.decideAt(0, "pause", api.DecisionPause, "alice")
		}
		return progress(3, 1, 1), nil // never done in this run
	}
	_, err := dt.run(DeploymentInput{Deployment: deploymentSpec([]string{"web-1"}, 2)})
	var can *workflow.ContinueAsNewError
	require.True(t, errors.As(err, &can), "got %v", err)
	require.NoError(t, dt.results["pause"].err)
	var next DeploymentInput
	require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(can.Input, &next))
	require.True(t, next.Progress.Paused, "the pause is handed to the next run")

	dt2 := setupDecisions(t)
	dt2.decideAt(time.Hour, "resume", api.DecisionResume, "bob")
	res, err := dt2.run(next)
	require.NoError(t, err)
	require.Equal(t, domain.DeploymentSucceeded, res.Status)
	require.NoError(t, dt2.results["resume"].err)
	var step1 time.Duration
	for _, s := range dt2.rec.of(advanceActivity) {
		if s.Input.(activityio.AdvanceStepInput).Position == 1 {
			step1 = s.At
			break
		}
	}
	require.Equal(t, time.Hour, step1, "step 1 starts only when resumed")
	waits := inputsOf[activityio.SetWaitingInput](t, dt2.rec, setWaitingActivity)
	require.Equal(t, events.WaitPaused, waits[0].Waiting.Kind)
	require.Equal(t, 1, waits[0].Waiting.StepPosition, "paused between steps, before step 1")
	require.Nil(t, waits[len(waits)-1].Waiting, "the wait is cleared at the end")
	recs := inputsOf[activityio.RecordDecisionInput](t, dt2.rec, recordDecisionActivity)
	require.Equal(t, api.DecisionResume, recs[0].Decision)
	require.True(t, strings.HasPrefix(recs[0].Comment, "from resume"))
}
