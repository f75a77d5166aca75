package workflows_test

import (
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/mantis-deploy/mantis/workflows"
)

// historiesDir holds the committed histories, one directory per recorded set (one set
// per shipped version of the workflows), one JSON file per scenario, in the format of
// `temporal workflow show --output json`. TestRecordHistories writes them.
const historiesDir = "testdata/histories"

// retiredDir holds the histories of retired workflow.GetVersion branches, one directory
// per set, out of historyFiles' glob (CONTRIBUTING.md, "Retiring a GetVersion branch").
const retiredDir = historiesDir + "/retired"

// retiredChanges names, for each retired set, the change id whose old branch its
// histories took, and which the workflow no longer supports.
var retiredChanges = map[string]string{
	"v1": "window-in-database",
}

// nondeterminismCode marks the SDK's errors for a history the code no longer produces.
const nondeterminismCode = "TMPRL1100"

// replayedTypes are the shipped workflows: each must have committed histories.
var replayedTypes = []string{workflows.DispatcherWorkflowType, workflows.DeploymentWorkflowType, workflows.TopologyWorkflowType}

// newReplayer registers the workflows under the names the workers register them with.
func newReplayer() worker.WorkflowReplayer {
	r := worker.NewWorkflowReplayer()
	r.RegisterWorkflowWithOptions(workflows.Dispatcher, workflow.RegisterOptions{Name: workflows.DispatcherWorkflowType})
	r.RegisterWorkflowWithOptions(workflows.Deployment, workflow.RegisterOptions{Name: workflows.DeploymentWorkflowType})
	r.RegisterWorkflowWithOptions(workflows.DeclareTopology, workflow.RegisterOptions{Name: workflows.TopologyWorkflowType})
	return r
}

func replayLogger() log.Logger {
	return log.NewStructuredLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})))
}

// historyFiles lists every committed history.
func historyFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(historiesDir, "*", "*.json"))
	require.NoError(t, err)
	require.NotEmpty(t, files, "no committed histories under %s", historiesDir)
	return files
}

// workflowTypeOf reads the workflow type a history was started as.
func workflowTypeOf(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	h, err := client.HistoryFromJSON(f, client.HistoryJSONOptions{})
	require.NoError(t, err, "reading %s", path)
	require.NotEmpty(t, h.GetEvents(), "%s has no events", path)
	started := h.GetEvents()[0].GetWorkflowExecutionStartedEventAttributes()
	require.NotNil(t, started, "%s does not start with WorkflowExecutionStarted", path)
	return started.GetWorkflowType().GetName()
}

// TestReplayHistories replays every committed history against the current workflow
// code: a change that would break the runs in flight (a command added, removed or
// reordered without workflow.GetVersion) fails here.
func TestReplayHistories(t *testing.T) {
	t.Parallel()
	covered := map[string]int{}
	for _, path := range historyFiles(t) {
		covered[workflowTypeOf(t, path)]++
		t.Run(filepath.ToSlash(path), func(t *testing.T) {
			t.Parallel()
			require.NoError(t, newReplayer().ReplayWorkflowHistoryFromJSONFile(replayLogger(), path))
		})
	}
	for _, typ := range replayedTypes {
		require.NotZero(t, covered[typ], "no committed history of workflow %s", typ)
	}
}

// TestReplayDetectsChangedWorkflow shows that the replay above is not vacuous: each
// history fails to replay against a workflow that schedules something else first.
func TestReplayDetectsChangedWorkflow(t *testing.T) {
	t.Parallel()
	changed := func(ctx workflow.Context) error {
		ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute})
		return workflow.ExecuteActivity(ctx, "SomethingElse").Get(ctx, nil)
	}
	for _, path := range historyFiles(t) {
		r := worker.NewWorkflowReplayer()
		r.RegisterWorkflowWithOptions(changed, workflow.RegisterOptions{Name: workflowTypeOf(t, path)})
		err := r.ReplayWorkflowHistoryFromJSONFile(replayLogger(), path)
		require.Error(t, err, "%s replayed against a different workflow", path)
		require.Contains(t, err.Error(), nondeterminismCode, "%s", path)
	}
}

// TestRetiredHistoriesFailToReplay holds a retirement: each retired history fails to
// replay because the workflow no longer supports the version of the change it
// recorded. It fails if the old branch comes back (the history replays) or if the
// oldest supported version goes down again (the history fails some other way).
func TestRetiredHistoriesFailToReplay(t *testing.T) {
	t.Parallel()
	dirs, err := filepath.Glob(filepath.Join(retiredDir, "*"))
	require.NoError(t, err)
	seen := map[string]bool{}
	for _, dir := range dirs {
		if st, err := os.Stat(dir); err != nil || !st.IsDir() {
			continue
		}
		set := filepath.Base(dir)
		change, ok := retiredChanges[set]
		require.True(t, ok, "retired set %s names no change in retiredChanges", set)
		seen[set] = true
		files, err := filepath.Glob(filepath.Join(dir, "*.json"))
		require.NoError(t, err)
		require.NotEmpty(t, files, "retired set %s holds no history", set)
		for _, path := range files {
			t.Run(filepath.ToSlash(path), func(t *testing.T) {
				t.Parallel()
				err := newReplayer().ReplayWorkflowHistoryFromJSONFile(replayLogger(), path)
				require.Error(t, err, "a retired history replays: the branch it took is back")
				require.ErrorContains(t, err, nondeterminismCode)
				require.ErrorContains(t, err, "removed support of version")
				require.ErrorContains(t, err, strconv.Quote(change))
			})
		}
	}
	for set := range retiredChanges {
		require.True(t, seen[set], "retired set %s has no directory under %s", set, retiredDir)
	}
}
