package workflows_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/temporalproto"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/mantis-deploy/mantis/internal/contract/activityio"
	"github.com/mantis-deploy/mantis/internal/contract/api"
	"github.com/mantis-deploy/mantis/internal/contract/spec"
	"github.com/mantis-deploy/mantis/internal/domain"
	"github.com/mantis-deploy/mantis/workflows"
)

// Events of decision Updates.
const (
	updateAccepted  = enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED
	updateCompleted = enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_COMPLETED
)

// windowStandIn plays the activities of the windowed deployment and of its human
// decisions for one scripted deployment.
type windowStandIn struct {
	targets int
	// failFirst names the step positions whose first AdvanceStep ends failed on one
	// target.
	failFirst map[int]bool
	// holdAt is the step position whose first AdvanceStep waits for release.
	holdAt  int
	held    chan struct{}
	release chan struct{}

	mu    sync.Mutex
	calls map[int]int
}

func newWindowStandIn(targets int) *windowStandIn {
	return &windowStandIn{targets: targets, failFirst: map[int]bool{}, holdAt: -1,
		held: make(chan struct{}, 1), release: make(chan struct{}), calls: map[int]int{}}
}

// StartDeployment stands in for activities.Activities.StartDeployment.
func (w *windowStandIn) StartDeployment(_ context.Context, in activityio.StartDeploymentInput) (activityio.StartDeploymentResult, error) {
	id, err := activityio.DeploymentIDFor(in.WorkflowID, in.Spec)
	return activityio.StartDeploymentResult{DeploymentID: id.String(), TargetCount: w.targets}, err
}

// AdvanceStep stands in for activities.Activities.AdvanceStep.
func (w *windowStandIn) AdvanceStep(ctx context.Context, in activityio.AdvanceStepInput) (activityio.AdvanceStepResult, error) {
	w.mu.Lock()
	call := w.calls[in.Position]
	w.calls[in.Position]++
	w.mu.Unlock()
	if in.Position == w.holdAt && call == 0 {
		w.held <- struct{}{}
		select {
		case <-w.release:
		case <-ctx.Done():
			return activityio.AdvanceStepResult{}, ctx.Err()
		}
	}
	if w.failFirst[in.Position] && call == 0 {
		return domain.StepProgress{Total: w.targets, Enqueued: w.targets, Succeeded: w.targets - 1, Failed: 1, Done: true,
			Status: domain.StepFailed, FailedTargets: []domain.TargetResult{{Target: "web-02", Status: domain.CommandFailed}}}, nil
	}
	return domain.StepProgress{Total: w.targets, Enqueued: w.targets, Succeeded: w.targets, Done: true, Status: domain.StepSucceeded}, nil
}

// StartStep stands in for activities.Activities.StartStep.
func (w *windowStandIn) StartStep(context.Context, activityio.StartStepInput) error { return nil }

// FinishStep stands in for activities.Activities.FinishStep.
func (w *windowStandIn) FinishStep(context.Context, activityio.FinishStepInput) error { return nil }

// SkipSteps stands in for activities.Activities.SkipSteps.
func (w *windowStandIn) SkipSteps(context.Context, activityio.SkipStepsInput) error { return nil }

// CancelDeploymentWork stands in for activities.Activities.CancelDeploymentWork.
func (w *windowStandIn) CancelDeploymentWork(context.Context, string) (int, error) { return 0, nil }

// FinishDeployment stands in for activities.Activities.FinishDeployment.
func (w *windowStandIn) FinishDeployment(_ context.Context, in activityio.FinishDeploymentInput) (string, error) {
	return in.Status, nil
}

// CancelDeployment stands in for activities.Activities.CancelDeployment.
func (w *windowStandIn) CancelDeployment(context.Context, activityio.CancelDeploymentInput) (activityio.CancelDeploymentResult, error) {
	return activityio.CancelDeploymentResult{}, nil
}

// EndDeployment stands in for activities.Activities.EndDeployment.
func (w *windowStandIn) EndDeployment(_ context.Context, in activityio.FinishDeploymentInput) (activityio.EndDeploymentResult, error) {
	return activityio.EndDeploymentResult{Status: in.Status}, nil
}

// SetWaiting stands in for activities.Activities.SetWaiting.
func (w *windowStandIn) SetWaiting(context.Context, activityio.SetWaitingInput) error { return nil }

// RecordDecision stands in for activities.Activities.RecordDecision.
func (w *windowStandIn) RecordDecision(_ context.Context, in activityio.RecordDecisionInput) (api.Decision, error) {
	return api.Decision{Decision: in.Decision, By: in.By, At: in.At, Step: in.Step, Comment: in.Comment}, nil
}

// RetryStep stands in for activities.Activities.RetryStep.
func (w *windowStandIn) RetryStep(context.Context, activityio.RetryStepInput) (int, error) {
	return 1, nil
}

// RetryStepRound stands in for activities.Activities.RetryStepRound.
func (w *windowStandIn) RetryStepRound(context.Context, activityio.RetryStepInput) (activityio.RetryStepRoundResult, error) {
	return activityio.RetryStepRoundResult{Targets: 1}, nil
}

// sendDecision sends a decision Update to the run, retrying while the deployment does
// not wait for it yet.
func sendDecision(t *testing.T, r recorder, run client.WorkflowRun, decision string) {
	t.Helper()
	require.Eventually(t, func() bool {
		h, err := r.c.UpdateWorkflow(context.Background(), client.UpdateWorkflowOptions{
			WorkflowID: run.GetID(), RunID: run.GetRunID(), UpdateName: decision,
			Args:         []any{workflows.DecisionInput{By: "release-manager", Comment: "recorded"}},
			WaitForStage: client.WorkflowUpdateStageCompleted,
		})
		if err == nil {
			err = h.Get(context.Background(), nil)
		}
		var appErr *temporal.ApplicationError
		if errors.As(err, &appErr) && appErr.Type() == workflows.DecisionNotExpected {
			return false
		}
		require.NoError(t, err)
		return true
	}, time.Minute, 200*time.Millisecond, "the deployment never took %s", decision)
}

// waitScheduled waits until the run's history schedules the activity.
func waitScheduled(t *testing.T, r recorder, run client.WorkflowRun, activity string) {
	t.Helper()
	require.Eventually(t, func() bool {
		h, err := fetchHistory(r.c, run)
		if err != nil {
			return false
		}
		for _, e := range h.GetEvents() {
			if a := e.GetActivityTaskScheduledEventAttributes(); a != nil && a.GetActivityType().GetName() == activity {
				return true
			}
		}
		return false
	}, time.Minute, 100*time.Millisecond, "%s was never scheduled", activity)
}

// decisionSpec is a deployment of two steps on three targets, the first changed by
// first.
func decisionSpec(first func(*spec.Step)) spec.Deployment {
	s := spec.Deployment{Name: "gated release", Targets: []string{"web-01", "web-02", "web-03"}, Steps: steps("deploy", "smoke-test")}
	first(&s.Steps[0])
	return s
}

func decisionScenarios() []scenario {
	approval := func(timeout, onTimeout string) func(*spec.Step) {
		return func(st *spec.Step) {
			*st = spec.Step{Name: "go-ahead", Kind: spec.StepKindApproval, Approvers: []string{"release-manager"}, Timeout: timeout, OnTimeout: onTimeout}
		}
	}
	asks := func(st *spec.Step) { st.OnFailure = spec.OnFailureAsk }
	plain := func(*spec.Step) {}
	retried := newWindowStandIn(3)
	retried.failFirst[0] = true
	aborted := newWindowStandIn(3)
	aborted.failFirst[0] = true
	paused := newWindowStandIn(3)
	paused.holdAt = 0
	decided := func(s spec.Deployment, decisions ...string) func(t *testing.T, r recorder) client.WorkflowRun {
		return func(t *testing.T, r recorder) client.WorkflowRun {
			run := runDeployment(s)(t, r)
			for _, d := range decisions {
				sendDecision(t, r, run, d)
			}
			return run
		}
	}
	return []scenario{
		{name: "deployment_approval_approved", activities: newWindowStandIn(3), want: []enumspb.EventType{timerStart, updateCompleted, completed},
			scheduled: map[string]int{"SetWaiting": 2, "RecordDecision": 1, "AdvanceStep": 1},
			run:       decided(decisionSpec(approval("", "")), api.DecisionApprove)},
		{name: "deployment_approval_timed_out", activities: newWindowStandIn(3), want: []enumspb.EventType{timerFired, completed},
			scheduled: map[string]int{"RecordDecision": 1, "AdvanceStep": 1},
			run:       runDeployment(decisionSpec(approval("2s", spec.OnTimeoutApprove)))},
		{name: "deployment_on_failure_retried", activities: retried, want: []enumspb.EventType{updateAccepted, completed},
			scheduled: map[string]int{activityio.RetryStepRound: 1, "AdvanceStep": 3},
			run:       decided(decisionSpec(asks), api.DecisionRetry)},
		{name: "deployment_on_failure_aborted", activities: aborted, want: []enumspb.EventType{updateCompleted, failed},
			scheduled: map[string]int{"RecordDecision": 1, "SkipSteps": 1},
			run:       decided(decisionSpec(asks), api.DecisionAbort)},
		{name: "deployment_paused_resumed", activities: paused, want: []enumspb.EventType{updateCompleted, completed},
			scheduled: map[string]int{"RecordDecision": 2, "SetWaiting": 2},
			run: func(t *testing.T, r recorder) client.WorkflowRun {
				run := runDeployment(decisionSpec(plain))(t, r)
				<-paused.held
				sendDecision(t, r, run, api.DecisionPause)
				close(paused.release)
				waitScheduled(t, r, run, "SetWaiting") // the pause took effect after the step
				sendDecision(t, r, run, api.DecisionResume)
				return run
			}},
	}
}

// TestRecordDecisionHistories records the histories of the paths that wait for a
// person into the set MANTIS_RECORD_HISTORIES names, for TestReplayHistories:
//
//	MANTIS_RECORD_HISTORIES=v2 go test ./workflows -run TestRecordDecisionHistories -count=1
func TestRecordDecisionHistories(t *testing.T) {
	c, dir, srv := startRecording(t)
	for _, sc := range decisionScenarios() {
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel()
			r := recorder{c: c, queue: srv.TaskQueue + "-" + sc.name}
			w := worker.New(c, r.queue, worker.Options{})
			w.RegisterWorkflowWithOptions(workflows.Deployment, workflow.RegisterOptions{Name: workflows.DeploymentWorkflowType})
			w.RegisterActivity(sc.activities)
			require.NoError(t, w.Start())
			t.Cleanup(w.Stop)
			run := sc.run(t, r)
			waitClosed(t, c, run)
			h := history(t, c, run)
			requireEvents(t, h, sc.want)
			requireScheduled(t, h, sc.scheduled)
			data, err := temporalproto.CustomJSONMarshalOptions{Indent: "  "}.Marshal(h)
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(filepath.Join(dir, sc.name+".json"), append(data, '\n'), 0o644))
		})
	}
}
