package workflows_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/mantis-deploy/mantis/internal/contract/activityio"
	"github.com/mantis-deploy/mantis/internal/contract/spec"
	"github.com/mantis-deploy/mantis/internal/domain"
	"github.com/mantis-deploy/mantis/internal/testrig/testenv"
	"github.com/mantis-deploy/mantis/workflows"
)

// Temporal's history limits per run, and the share of them a deployment run may use.
const (
	historyEventLimit = 51200
	historyBytesLimit = 50 << 20
	historyShare      = 10 // percent
)

// scaleStandIn stands in for the deployment activities under their names: it answers
// like the database-side window would for targets targets at maxParallel (0: all),
// ending every step after callsPerStep AdvanceStep calls.
type scaleStandIn struct {
	targets, maxParallel, callsPerStep int

	mu    sync.Mutex
	calls map[int]int
}

func (s *scaleStandIn) StartDeployment(_ context.Context, in activityio.StartDeploymentInput) (activityio.StartDeploymentResult, error) {
	id, err := activityio.DeploymentIDFor(in.WorkflowID, in.Spec)
	if err != nil {
		return activityio.StartDeploymentResult{}, err
	}
	if !in.CountOnly {
		return activityio.StartDeploymentResult{}, fmt.Errorf("the target names were asked for")
	}
	return activityio.StartDeploymentResult{DeploymentID: id.String(), TargetCount: s.targets}, nil
}

func (s *scaleStandIn) AdvanceStep(_ context.Context, in activityio.AdvanceStepInput) (activityio.AdvanceStepResult, error) {
	s.mu.Lock()
	s.calls[in.Position]++
	n := s.calls[in.Position]
	s.mu.Unlock()
	if n >= s.callsPerStep {
		return domain.StepProgress{Total: s.targets, Enqueued: s.targets, Succeeded: s.targets, Done: true, Status: "succeeded"}, nil
	}
	window := s.targets
	if s.maxParallel > 0 {
		window = min(s.maxParallel, s.targets)
	}
	ended := s.targets * n / s.callsPerStep
	enqueued := min(ended+window, s.targets)
	return domain.StepProgress{Total: s.targets, Enqueued: enqueued, Succeeded: ended, Running: enqueued - ended, Skipped: s.targets - enqueued}, nil
}

func (s *scaleStandIn) FinishStep(context.Context, activityio.FinishStepInput) error { return nil }

func (s *scaleStandIn) SkipSteps(context.Context, activityio.SkipStepsInput) error { return nil }

func (s *scaleStandIn) EndDeployment(_ context.Context, in activityio.FinishDeploymentInput) (activityio.EndDeploymentResult, error) {
	return activityio.EndDeploymentResult{Status: in.Status}, nil
}

func (s *scaleStandIn) CancelDeployment(context.Context, activityio.CancelDeploymentInput) (activityio.CancelDeploymentResult, error) {
	return activityio.CancelDeploymentResult{}, nil
}

// runFigure is one run's history as the server counts it, and what the run carried.
type runFigure struct {
	events, bytes int64
	load          runLoad
}

// runFigures walks a workflow's runs from the first through every continue-as-new.
func runFigures(ctx context.Context, t *testing.T, c client.Client, id, runID string) []runFigure {
	t.Helper()
	var out []runFigure
	for runID != "" {
		d, err := rawDescription(c.DescribeWorkflow(ctx, id, runID))
		require.NoError(t, err)
		info := d.GetWorkflowExecutionInfo()
		out = append(out, runFigure{events: info.GetHistoryLength(), bytes: info.GetHistorySizeBytes(),
			load: runLoadOf(ctx, t, c, id, runID)})
		next := ""
		it := c.GetWorkflowHistory(ctx, id, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_CLOSE_EVENT)
		for it.HasNext() {
			ev, err := it.Next()
			require.NoError(t, err)
			if a := ev.GetWorkflowExecutionContinuedAsNewEventAttributes(); a != nil {
				next = a.GetNewExecutionRunId()
			}
		}
		runID = next
	}
	return out
}

// TestDeploymentHistoryAtScale runs 10,000-target deployments on the Temporal dev server
// with stand-in activities, and checks every run of each (through every continue-as-new)
// against a tenth of Temporal's limits: history events and bytes, the largest payload
// and the activities pending at once. The figures are in bench/results/.
func TestDeploymentHistoryAtScale(t *testing.T) {
	srv := testenv.TemporalServer(t)
	c, err := client.Dial(client.Options{
		HostPort: srv.Address, Namespace: srv.Namespace,
		Logger: log.NewStructuredLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))),
	})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel) // the subtests run in parallel, after this function returns
	registerSearchAttributes(ctx, t, c, srv.Namespace)

	targets := make([]string, spec.MaxTargets)
	for i := range targets {
		targets[i] = fmt.Sprintf("web-%05d", i)
	}
	scenarios := []struct {
		name                      string
		steps, maxParallel, calls int
	}{
		// Each step ends at its second AdvanceStep call: a step shorter than 4 minutes.
		{"max_parallel_1", spec.MaxSteps, 1, 2},
		{"max_parallel_100", spec.MaxSteps, 100, 2},
		{"max_parallel_all", spec.MaxSteps, 0, 2},
		// One step that outlasts a run (350 AdvanceStep calls of up to 2 minutes each:
		// over 11 hours): it goes on across continue-as-new.
		{"one_long_step", 1, 1, 350},
	}
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel()
			queue := srv.TaskQueue + "-" + sc.name
			w := worker.New(c, queue, worker.Options{})
			w.RegisterWorkflowWithOptions(workflows.Deployment, workflow.RegisterOptions{Name: workflows.DeploymentWorkflowType})
			w.RegisterActivity(&scaleStandIn{targets: len(targets), maxParallel: sc.maxParallel, callsPerStep: sc.calls, calls: map[int]int{}})
			require.NoError(t, w.Start())
			t.Cleanup(w.Stop)

			d := spec.Deployment{Name: "scale-" + sc.name, Targets: targets, MaxParallel: sc.maxParallel}
			for i := range sc.steps {
				d.Steps = append(d.Steps, spec.Step{Name: fmt.Sprintf("step-%03d", i), Command: fmt.Sprintf("./deploy.sh %d", i)})
			}
			began := time.Now()
			run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "scale-" + queue, TaskQueue: queue}, workflows.DeploymentWorkflowType, d)
			require.NoError(t, err)
			firstRun := run.GetRunID() // Get follows the runs
			var res workflows.DeploymentResult
			require.NoError(t, run.Get(ctx, &res))
			took := time.Since(began)
			require.Equal(t, domain.DeploymentSucceeded, res.Status)
			require.Len(t, res.Steps, sc.steps)
			for _, s := range res.Steps {
				require.Equal(t, len(targets), s.Succeeded, s.Name)
			}

			figs := runFigures(ctx, t, c, run.GetID(), firstRun)
			var maxEvents, maxBytes int64
			var maxPayload, maxPending int
			for i, f := range figs {
				t.Logf("%s run %d: %d events, %d bytes, largest payload %d bytes (%s), at most %d activities pending",
					sc.name, i+1, f.events, f.bytes, f.load.maxPayload, f.load.payloadEvent, f.load.maxPending)
				maxEvents, maxBytes = max(maxEvents, f.events), max(maxBytes, f.bytes)
				maxPayload, maxPending = max(maxPayload, f.load.maxPayload), max(maxPending, f.load.maxPending)
				require.Less(t, f.events, int64(historyEventLimit*historyShare/100), "run %d", i+1)
				require.Less(t, f.bytes, int64(historyBytesLimit*historyShare/100), "run %d", i+1)
				require.Less(t, f.load.maxPayload, payloadBytesLimit*historyShare/100, "run %d: largest payload", i+1)
				require.Less(t, f.load.maxPending, pendingActivityLimit*historyShare/100, "run %d: pending activities", i+1)
				require.Positive(t, f.load.maxPending, "run %d schedules activities", i+1)
			}
			t.Logf("| %s | %d × %d | %d | %d | %d | %d | %d | %s |", sc.name, sc.steps, len(targets), len(figs),
				maxEvents, maxBytes, maxPayload, maxPending, took.Round(time.Second))
			if sc.calls > 300 {
				require.Greater(t, len(figs), 1, "a step longer than a run's budget continues as new")
			}
		})
	}
}
