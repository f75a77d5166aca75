package workflows_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/temporalproto"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/mantis-deploy/mantis/internal/contract/activityio"
	"github.com/mantis-deploy/mantis/internal/contract/spec"
	"github.com/mantis-deploy/mantis/internal/domain"
	"github.com/mantis-deploy/mantis/workflows"
)

// Events of an activity the workflow cancels and waits for.
const (
	actCancelAsked = enumspb.EVENT_TYPE_ACTIVITY_TASK_CANCEL_REQUESTED
	actCanceled    = enumspb.EVENT_TYPE_ACTIVITY_TASK_CANCELED
)

// longStepCalls is how many AdvanceStep calls the long step of the continue-as-new
// scenario takes to end: more than a run's activity budget (300), so the run continues
// as new in the middle of the step, and the next run ends it.
const longStepCalls = 310

// windowRecordingTimeout bounds one recorded scenario: the long step's 310 activities
// take a minute or two on a busy dev server.
const windowRecordingTimeout = 5 * time.Minute

// advancingStandIn plays the windowed deployment's activities with two scripts: the
// step at blockAt heartbeats until the workflow cancels it, and the step at longAt
// reports progress, not an end, until its longStepCalls-th AdvanceStep call.
type advancingStandIn struct {
	*windowStandIn
	blockAt, longAt int
	blocked         chan struct{}
}

func newAdvancingStandIn(targets int) *advancingStandIn {
	return &advancingStandIn{windowStandIn: newWindowStandIn(targets), blockAt: -1, longAt: -1, blocked: make(chan struct{}, 1)}
}

// AdvanceStep stands in for activities.Activities.AdvanceStep.
func (a *advancingStandIn) AdvanceStep(ctx context.Context, in activityio.AdvanceStepInput) (activityio.AdvanceStepResult, error) {
	if in.Position == a.blockAt {
		return activityio.AdvanceStepResult{}, blockUntilCancelled(ctx, a.blocked, a.release)
	}
	a.mu.Lock()
	a.calls[in.Position]++
	call := a.calls[in.Position]
	a.mu.Unlock()
	if in.Position == a.longAt && call < longStepCalls {
		ended := min(call, a.targets-1)
		return domain.StepProgress{Total: a.targets, Enqueued: ended + 1, Succeeded: ended, Running: 1,
			Skipped: a.targets - ended - 1}, nil
	}
	return domain.StepProgress{Total: a.targets, Enqueued: a.targets, Succeeded: a.targets, Done: true, Status: domain.StepSucceeded}, nil
}

// windowScenario is a recorded scenario of one run or more.
type windowScenario struct {
	scenario
	// runs is how many runs the scenario makes, through continue-as-new.
	runs int
	// lastWant lists events the last run's history must hold.
	lastWant []enumspb.EventType
}

// windowScenarios are the windowed deployment's paths the earlier sets do not hold: a
// cancel that reaches a running AdvanceStep (the workflow waits for the call to stop
// before it cancels the step's work), and a step longer than a run's budget, which
// continues as new in the middle of the step. Each run of a scenario is recorded.
func windowScenarios() []windowScenario {
	cancelled := newAdvancingStandIn(2)
	cancelled.blockAt = 1
	long := newAdvancingStandIn(3)
	long.longAt = 0
	return []windowScenario{
		{runs: 1, lastWant: []enumspb.EventType{canceled}, scenario: scenario{
			name: "deployment_window_cancelled_advancing", activities: cancelled,
			want: []enumspb.EventType{cancelAsked, actCancelAsked, actCanceled, canceled},
			scheduled: map[string]int{"AdvanceStep": 2, activityio.CancelDeployment: 1, "FinishStep": 1,
				"SkipSteps": 1, activityio.EndDeployment: 1},
			run: func(t *testing.T, r recorder) client.WorkflowRun {
				t.Cleanup(func() { close(cancelled.release) })
				run := runDeployment(spec.Deployment{Name: "web release", Targets: []string{"web-01", "web-02"},
					Steps: steps("fetch", "migrate", "restart")})(t, r)
				cancelWhenBlocked(t, r, run, cancelled.blocked)
				return run
			}}},
		{runs: 2, lastWant: []enumspb.EventType{completed}, scenario: scenario{
			name: "deployment_window_continued_as_new", activities: long,
			want:      []enumspb.EventType{continued},
			scheduled: map[string]int{"StartDeployment": 1, "AdvanceStep": 300},
			run: runDeployment(spec.Deployment{Name: "long release", Targets: []string{"web-01", "web-02", "web-03"},
				Steps: steps("drain-and-deploy", "smoke-test")})}},
	}
}

// recordOnlyEnv, when set, records only the scenarios whose name starts with it.
const recordOnlyEnv = "MANTIS_RECORD_ONLY"

// TestRecordWindowHistories records the histories of windowScenarios and
// rolloutScenarios (those whose name starts with MANTIS_RECORD_ONLY, when set) into
// the set MANTIS_RECORD_HISTORIES names, for TestReplayHistories; a scenario of
// several runs is written one file per run, _run1, _run2 and so on:
//
//	MANTIS_RECORD_HISTORIES=v5 MANTIS_RECORD_ONLY=deployment_rollout go test ./workflows -run TestRecordWindowHistories -count=1
func TestRecordWindowHistories(t *testing.T) {
	c, dir, srv := startRecording(t)
	only := os.Getenv(recordOnlyEnv)
	for _, sc := range append(windowScenarios(), rolloutScenarios()...) {
		if !strings.HasPrefix(sc.name, only) {
			continue
		}
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel()
			r := recorder{c: c, queue: srv.TaskQueue + "-" + sc.name}
			w := worker.New(c, r.queue, worker.Options{})
			w.RegisterWorkflowWithOptions(workflows.Deployment, workflow.RegisterOptions{Name: workflows.DeploymentWorkflowType})
			w.RegisterActivity(sc.activities)
			require.NoError(t, w.Start())
			t.Cleanup(w.Stop)
			runs := recordRuns(t, c, sc.run(t, r))
			require.Len(t, runs, sc.runs, "runs of %s", sc.name)
			requireEvents(t, runs[0], sc.want)
			requireScheduled(t, runs[0], sc.scheduled)
			requireEvents(t, runs[len(runs)-1], sc.lastWant)
			for i, h := range runs {
				name := sc.name
				if len(runs) > 1 {
					name = fmt.Sprintf("%s_run%d", sc.name, i+1)
				}
				data, err := temporalproto.CustomJSONMarshalOptions{Indent: "  "}.Marshal(h)
				require.NoError(t, err)
				require.NoError(t, os.WriteFile(filepath.Join(dir, name+".json"), append(data, '\n'), 0o644))
			}
		})
	}
}

// recordRuns waits for the run and each run it continues as, and returns their
// histories, first to last.
func recordRuns(t *testing.T, c client.Client, run client.WorkflowRun) []*historypb.History {
	t.Helper()
	var out []*historypb.History
	for runID := run.GetRunID(); runID != ""; {
		r := c.GetWorkflow(context.Background(), run.GetID(), runID)
		require.Eventually(t, func() bool {
			d, err := c.DescribeWorkflow(context.Background(), r.GetID(), r.GetRunID())
			return err == nil && d.Status != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING
		}, windowRecordingTimeout, 200*time.Millisecond, "workflow %s run %s did not end", r.GetID(), r.GetRunID())
		h := history(t, c, r)
		out = append(out, h)
		events := h.GetEvents()
		runID = events[len(events)-1].GetWorkflowExecutionContinuedAsNewEventAttributes().GetNewExecutionRunId()
	}
	return out
}
