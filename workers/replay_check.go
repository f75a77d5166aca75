package workers

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/mantis-deploy/mantis/workflows"
)

// WorkflowTypes are the workflow types RegisterWorkflows registers, the ones a replay
// check reads.
var WorkflowTypes = []string{workflows.DeploymentWorkflowType, workflows.DispatcherWorkflowType, workflows.TopologyWorkflowType}

// maxListPage is the most executions asked for in one visibility call.
const maxListPage = 1000

// ReplayCheckOptions says which open executions a replay check reads and how it
// decodes them.
type ReplayCheckOptions struct {
	// Namespace is the namespace the client is connected to.
	Namespace string
	// Types are the workflow types to check, of WorkflowTypes; none means all of them.
	Types []string
	// TaskQueue, when set, checks only the executions of that task queue.
	TaskQueue string
	// Limit is the most executions replayed; more open ones make the report Truncated.
	Limit int
	// DataConverter decodes the histories' payloads as the workers do (the payload
	// codec's when payloads are encrypted); nil is the SDK's default.
	DataConverter converter.DataConverter
	// Logger receives the SDK's own messages while replaying; nil discards them.
	Logger log.Logger
}

// Results of one execution's replay.
const (
	// ReplayOK: the current code issues the commands the history recorded.
	ReplayOK = "ok"
	// ReplayFailed: it does not (a nondeterminism error), or the history could not be
	// read or replayed at all.
	ReplayFailed = "failed"
	// ReplayNotStarted: no workflow task has completed, so the history holds no
	// command yet; whichever code runs the first task decides them.
	ReplayNotStarted = "not-started"
)

// ReplayedExecution is one open execution and how its replay went.
type ReplayedExecution struct {
	WorkflowID string `json:"workflow_id"`
	RunID      string `json:"run_id"`
	Type       string `json:"type"`
	TaskQueue  string `json:"task_queue"`
	Events     int    `json:"events"`
	Result     string `json:"result"`
	// Error is the first error the replay met, the nondeterminism it found.
	Error string `json:"error,omitempty"`
}

// ReplayReport is what a replay check found.
type ReplayReport struct {
	Namespace string `json:"namespace"`
	// Query is the visibility query that listed the executions.
	Query      string              `json:"query"`
	Executions []ReplayedExecution `json:"executions"`
	// Truncated says that more executions were open than the limit: those were not
	// replayed.
	Truncated bool `json:"truncated"`
}

// Failed counts the executions whose replay failed.
func (r ReplayReport) Failed() int {
	n := 0
	for _, e := range r.Executions {
		if e.Result == ReplayFailed {
			n++
		}
	}
	return n
}

// ReplayOpenExecutions replays the open executions of Mantis's workflows in the
// namespace against this binary's workflow code, registered as the workers register
// it: before an upgrade, the new binary finds the runs in flight its code would break.
// Each execution's whole history is fetched and replayed, after temporalio/samples-go's
// multi-history replayer. An error is returned only when the executions cannot be
// listed; an execution that cannot be read or replayed is a failed result.
func ReplayOpenExecutions(ctx context.Context, c client.Client, opts ReplayCheckOptions) (ReplayReport, error) {
	query, err := openExecutionsQuery(opts.Types, opts.TaskQueue)
	if err != nil {
		return ReplayReport{}, err
	}
	if opts.Limit < 1 {
		return ReplayReport{}, fmt.Errorf("the limit must be at least 1, got %d", opts.Limit)
	}
	report := ReplayReport{Namespace: opts.Namespace, Query: query, Executions: []ReplayedExecution{}}
	open, err := listOpen(ctx, c, opts.Namespace, query, opts.Limit+1)
	if err != nil {
		return report, err
	}
	if len(open) > opts.Limit {
		open, report.Truncated = open[:opts.Limit], true
	}
	replayer, err := worker.NewWorkflowReplayerWithOptions(worker.WorkflowReplayerOptions{DataConverter: opts.DataConverter})
	if err != nil {
		return report, fmt.Errorf("creating the workflow replayer: %w", err)
	}
	RegisterWorkflows(replayer)
	logger := opts.Logger
	if logger == nil {
		logger = log.NewStructuredLogger(slog.New(slog.DiscardHandler))
	}
	for _, info := range open {
		report.Executions = append(report.Executions, replayOne(ctx, c, replayer, logger, info))
	}
	return report, nil
}

// openExecutionsQuery is the visibility query of the running executions of types
// (all of WorkflowTypes when empty), on taskQueue when set.
func openExecutionsQuery(types []string, taskQueue string) (string, error) {
	if len(types) == 0 {
		types = WorkflowTypes
	}
	alternatives := make([]string, 0, len(types))
	for _, t := range types {
		if !slices.Contains(WorkflowTypes, t) {
			return "", fmt.Errorf("workflow type %q: not one of Mantis's (%s)", t, strings.Join(WorkflowTypes, ", "))
		}
		alternatives = append(alternatives, fmt.Sprintf("WorkflowType = '%s'", t))
	}
	query := fmt.Sprintf("ExecutionStatus = 'Running' AND (%s)", strings.Join(alternatives, " OR "))
	if taskQueue != "" {
		if strings.ContainsAny(taskQueue, `'"\`) {
			return "", fmt.Errorf("task queue %q: quotes and backslashes are not accepted", taskQueue)
		}
		query += fmt.Sprintf(" AND TaskQueue = '%s'", taskQueue)
	}
	return query, nil
}

// listOpen lists at most max executions query matches.
func listOpen(ctx context.Context, c client.Client, namespace, query string, max int) ([]*workflowpb.WorkflowExecutionInfo, error) {
	var out []*workflowpb.WorkflowExecutionInfo
	var token []byte
	for len(out) < max {
		resp, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Namespace: namespace, Query: query, PageSize: int32(min(max-len(out), maxListPage)), NextPageToken: token,
		})
		if err != nil {
			return nil, fmt.Errorf("listing open executions (%s): %w", query, err)
		}
		out = append(out, resp.GetExecutions()...)
		if token = resp.GetNextPageToken(); len(token) == 0 {
			break
		}
	}
	return out[:min(len(out), max)], nil
}

// replayOne fetches one execution's history and replays it.
func replayOne(ctx context.Context, c client.Client, replayer worker.WorkflowReplayer, logger log.Logger, info *workflowpb.WorkflowExecutionInfo) ReplayedExecution {
	ex := info.GetExecution()
	r := ReplayedExecution{WorkflowID: ex.GetWorkflowId(), RunID: ex.GetRunId(), Type: info.GetType().GetName(), TaskQueue: info.GetTaskQueue()}
	history, err := fetchHistory(ctx, c, r.WorkflowID, r.RunID)
	r.Events = len(history.GetEvents())
	switch {
	case err != nil:
		r.Result, r.Error = ReplayFailed, err.Error()
	case !completedWorkflowTask(history):
		r.Result = ReplayNotStarted
	default:
		err = replayer.ReplayWorkflowHistoryWithOptions(logger, history, worker.ReplayWorkflowHistoryOptions{
			OriginalExecution: workflow.Execution{ID: r.WorkflowID, RunID: r.RunID}})
		r.Result = ReplayOK
		if err != nil {
			r.Result, r.Error = ReplayFailed, err.Error()
		}
	}
	return r
}

// fetchHistory reads an execution's whole history.
func fetchHistory(ctx context.Context, c client.Client, id, runID string) (*historypb.History, error) {
	it := c.GetWorkflowHistory(ctx, id, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	history := &historypb.History{}
	for it.HasNext() {
		event, err := it.Next()
		if err != nil {
			return history, fmt.Errorf("reading the history of %s (run %s): %w", id, runID, err)
		}
		history.Events = append(history.Events, event)
	}
	return history, nil
}

// completedWorkflowTask reports whether a workflow task completed in history, so that
// it records commands to compare.
func completedWorkflowTask(history *historypb.History) bool {
	for _, e := range history.GetEvents() {
		if e.GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED {
			return true
		}
	}
	return false
}
