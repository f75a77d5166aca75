package workflows_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/temporalproto"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/mantis-deploy/mantis/internal/testrig/testenv"
	"github.com/mantis-deploy/mantis/workflows"
)

// recordHistoriesEnv asks TestRecordHistories to record; its value names the set, the
// directory under testdata/histories the histories are written to. Record a new set
// for each shipped change of the workflows and keep the older sets, so the runs still
// in flight keep replaying:
//
//	MANTIS_RECORD_HISTORIES=v2 go test ./workflows -run TestRecordHistories -count=1
//
// It runs the real workflow code in a real worker against the Temporal server of
// internal/testrig/testenv, with stand-ins under the activities' names (the history depends
// only on the workflow code and the activity results).
const recordHistoriesEnv = "MANTIS_RECORD_HISTORIES"

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

// recorder is what a scenario needs to run its workflow.
type recorder struct {
	c     client.Client
	queue string
}

// scenario is one recorded history.
type scenario struct {
	name string
	// activities is the stand-in whose methods are registered as the activities.
	activities any
	// run starts the workflow and drives it (signals, cancels); it returns the run
	// whose history is recorded.
	run func(t *testing.T, r recorder) client.WorkflowRun
	// want lists events the history must hold, so that it exercises its branch.
	want []enumspb.EventType
	// scheduled is the least number of times the history schedules each activity.
	scheduled map[string]int
}

// TestRecordHistories records the Dispatcher and DeclareTopology histories
// TestReplayHistories replays; TestRecordWindowHistories and
// TestRecordDecisionHistories record the Deployment's. It does nothing unless
// MANTIS_RECORD_HISTORIES names the set to write.
func TestRecordHistories(t *testing.T) {
	c, dir, srv := startRecording(t)

	for _, sc := range dispatcherScenarios() {
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel()
			r := recorder{c: c, queue: srv.TaskQueue + "-" + sc.name}
			w := worker.New(c, r.queue, worker.Options{})
			w.RegisterWorkflowWithOptions(workflows.Dispatcher, workflow.RegisterOptions{Name: workflows.DispatcherWorkflowType})
			w.RegisterWorkflowWithOptions(workflows.Deployment, workflow.RegisterOptions{Name: workflows.DeploymentWorkflowType})
			w.RegisterWorkflowWithOptions(workflows.DeclareTopology, workflow.RegisterOptions{Name: workflows.TopologyWorkflowType})
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

// waitClosed waits until the run (not the chain it continues as) has ended.
func waitClosed(t *testing.T, c client.Client, run client.WorkflowRun) {
	t.Helper()
	require.Eventually(t, func() bool {
		d, err := c.DescribeWorkflow(context.Background(), run.GetID(), run.GetRunID())
		return err == nil && d.Status != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING
	}, time.Minute, 100*time.Millisecond, "workflow %s did not end", run.GetID())
}

// history fetches the run's whole history.
func history(t *testing.T, c client.Client, run client.WorkflowRun) *historypb.History {
	t.Helper()
	h, err := fetchHistory(c, run)
	require.NoError(t, err)
	return h
}

func fetchHistory(c client.Client, run client.WorkflowRun) (*historypb.History, error) {
	it := c.GetWorkflowHistory(context.Background(), run.GetID(), run.GetRunID(), false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	h := &historypb.History{}
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			return nil, fmt.Errorf("reading history of %s: %w", run.GetID(), err)
		}
		h.Events = append(h.Events, e)
	}
	return h, nil
}

// waitForEvents waits until the run's history holds n events of a type.
func waitForEvents(t *testing.T, c client.Client, run client.WorkflowRun, typ enumspb.EventType, n int) {
	t.Helper()
	require.Eventually(t, func() bool {
		h, err := fetchHistory(c, run)
		if err != nil {
			return false
		}
		have := 0
		for _, e := range h.GetEvents() {
			if e.GetEventType() == typ {
				have++
			}
		}
		return have >= n
	}, time.Minute, 50*time.Millisecond, "workflow %s: waiting for %d %s", run.GetID(), n, typ)
}

func requireEvents(t *testing.T, h *historypb.History, want []enumspb.EventType) {
	t.Helper()
	have := map[enumspb.EventType]bool{}
	for _, e := range h.GetEvents() {
		have[e.GetEventType()] = true
	}
	for _, typ := range want {
		require.True(t, have[typ], "the recorded history has no %s", typ)
	}
}

// localActivityMarker is the name of the marker that records a local activity.
const localActivityMarker = "LocalActivity"

// requireScheduled checks how many times the history runs each activity, scheduled
// or run locally (a LocalActivity marker).
func requireScheduled(t *testing.T, h *historypb.History, want map[string]int) {
	t.Helper()
	have := map[string]int{}
	for _, e := range h.GetEvents() {
		if a := e.GetActivityTaskScheduledEventAttributes(); a != nil {
			have[a.GetActivityType().GetName()]++
		}
		if m := e.GetMarkerRecordedEventAttributes(); m != nil && m.GetMarkerName() == localActivityMarker {
			var data struct{ ActivityType string }
			require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(m.GetDetails()["data"], &data))
			have[data.ActivityType]++
		}
	}
	for name, n := range want {
		require.GreaterOrEqual(t, have[name], n, "the recorded history schedules %s %d times", name, have[name])
	}
}

// startWorkflow starts a workflow on the scenario's task queue.
func startWorkflow(t *testing.T, r recorder, id string, attrs temporal.SearchAttributes, typ string, args ...any) client.WorkflowRun {
	t.Helper()
	run, err := r.c.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{
		ID: id, TaskQueue: r.queue, TypedSearchAttributes: attrs,
	}, typ, args...)
	require.NoError(t, err)
	return run
}

// registerSearchAttributes registers the workflows' search attributes, as Mandible does
// at start-up (workers.PrepareNamespace; the workflows' tests do not import
// workers, which depends on them).
func registerSearchAttributes(ctx context.Context, t *testing.T, c client.Client, namespace string) {
	t.Helper()
	have, err := c.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: namespace})
	require.NoError(t, err)
	missing := map[string]enumspb.IndexedValueType{}
	for _, k := range workflows.SearchAttributes() {
		if _, ok := have.GetCustomAttributes()[k.GetName()]; !ok {
			missing[k.GetName()] = k.GetValueType()
		}
	}
	if len(missing) == 0 {
		return
	}
	_, err = c.OperatorService().AddSearchAttributes(ctx, &operatorservice.AddSearchAttributesRequest{Namespace: namespace, SearchAttributes: missing})
	var exists *serviceerror.AlreadyExists
	if err != nil && !errors.As(err, &exists) {
		require.NoError(t, err)
	}
}

// startRecording skips the test unless MANTIS_RECORD_HISTORIES names a set, and
// otherwise returns a client of the test Temporal server with Mantis's search
// attributes registered, the set's directory (created) and the server.
func startRecording(t *testing.T) (client.Client, string, testenv.Temporal) {
	t.Helper()
	set := os.Getenv(recordHistoriesEnv)
	if set == "" {
		t.Skipf("set %s=<set name> to record workflow histories", recordHistoriesEnv)
	}
	dir := filepath.Join(historiesDir, set)
	require.NoError(t, os.MkdirAll(dir, 0o755))
	srv := testenv.TemporalServer(t)
	c, err := client.Dial(client.Options{
		HostPort: srv.Address, Namespace: srv.Namespace,
		Logger: log.NewStructuredLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))),
	})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	registerSearchAttributes(ctx, t, c, srv.Namespace)
	return c, dir, srv
}
