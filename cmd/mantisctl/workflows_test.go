package main

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/mantis-deploy/mantis/internal/codec"
	"github.com/mantis-deploy/mantis/internal/config"
	"github.com/mantis-deploy/mantis/internal/temporalclient"
	"github.com/mantis-deploy/mantis/internal/testrig/testenv"
	"github.com/mantis-deploy/mantis/workers"
	"github.com/mantis-deploy/mantis/workflows"
)

// replayStack is a Temporal server with a Mandible configuration whose [temporal]
// section reaches it with encrypted payloads, and a client built from that section as
// Mandible builds its own.
type replayStack struct {
	srv    testenv.Temporal
	config string
	client client.Client
}

func newReplayStack(t *testing.T) replayStack {
	t.Helper()
	srv := testenv.TemporalServer(t)
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "codec.key")
	_, err := codec.WriteKeyFile(keyFile, "k1")
	require.NoError(t, err)
	path := filepath.Join(dir, "mandible.toml")
	require.NoError(t, os.WriteFile(path, fmt.Appendf(nil, "replica_id = \"r1\"\n[temporal]\naddress = %q\nnamespace = %q\ncodec_key_file = %q\n",
		srv.Address, srv.Namespace, keyFile), 0o600))
	cfg, err := config.LoadMandibleTemporal(path, nil)
	require.NoError(t, err)
	opts, _, err := temporalclient.Options(cfg, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	c, err := client.Dial(opts)
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return replayStack{srv: srv, config: path, client: c}
}

// start starts a workflow of type typ on queue.
func (s replayStack) start(t *testing.T, id, queue, typ string, args ...any) {
	t.Helper()
	_, err := s.client.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{ID: id, TaskQueue: queue}, typ, args...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.client.TerminateWorkflow(context.Background(), id, "", "test ended") })
}

// waitListed waits until the open executions of queue are listed and the ones ran
// names have completed a workflow task.
func (s replayStack) waitListed(t *testing.T, queue string, open int, ran ...string) {
	t.Helper()
	require.Eventually(t, func() bool {
		resp, err := s.client.ListWorkflow(context.Background(), &workflowservice.ListWorkflowExecutionsRequest{
			Namespace: s.srv.Namespace, Query: fmt.Sprintf("ExecutionStatus = 'Running' AND TaskQueue = '%s'", queue)})
		if err != nil || len(resp.GetExecutions()) != open {
			return false
		}
		for _, id := range ran {
			if !s.taskCompleted(id) {
				return false
			}
		}
		return true
	}, 30*time.Second, 200*time.Millisecond)
}

// taskCompleted reports whether the execution's first workflow task completed: its
// history goes past started, scheduled, started, completed, and no task is pending.
func (s replayStack) taskCompleted(id string) bool {
	d, err := s.client.DescribeWorkflow(context.Background(), id, "")
	return err == nil && d.RawResponse.GetPendingWorkflowTask() == nil && d.RawResponse.GetWorkflowExecutionInfo().GetHistoryLength() > 4
}

// runMantisctl runs mantisctl in process and returns its exit code and what it printed.
func runMantisctl(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), append(args, "--client-config", ""), strings.NewReader(""), &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// Open executions of each of Mandible's workflows that the workers ran, and one no
// worker ran yet, replay against this binary's code: each is ok or not-started and the check
// exits 0. A bad flag is a usage error; more open executions than --limit fail.
func TestReplayCheckPassesOpenExecutionsOfThisCode(t *testing.T) {
	t.Parallel()
	s := newReplayStack(t)
	queue := s.srv.TaskQueue
	// Mandible's workflows and no activities: each workflow schedules its first
	// activity and waits, open, as a run waits on a busy worker.
	w := worker.New(s.client, queue, worker.Options{})
	workers.RegisterWorkflows(w)
	require.NoError(t, w.Start())
	deployment := workflows.DeploymentWorkflowID("replay-" + uuid.NewString())
	topology := workflows.TopologyWorkflowID("replay-" + uuid.NewString())
	s.start(t, deployment, queue, workflows.DeploymentWorkflowType, map[string]any{
		"name": "replay-check", "targets": []string{"web-1"}, "steps": []map[string]any{{"name": "install", "command": "true"}}})
	s.start(t, topology, queue, workflows.TopologyWorkflowType)
	dispatcher := workflows.DispatcherWorkflowID("replay-" + uuid.NewString())
	s.start(t, dispatcher, queue, workflows.DispatcherWorkflowType,
		workflows.DispatcherInput{ReplicaID: "r1", BatchSize: 10, PollInterval: 30 * time.Second})
	s.waitListed(t, queue, 3, deployment, topology, dispatcher)
	w.Stop()
	unrun := workflows.DeploymentWorkflowID("replay-" + uuid.NewString())
	s.start(t, unrun, queue, workflows.DeploymentWorkflowType, map[string]any{"name": "later", "targets": []string{"web-1"}})
	s.waitListed(t, queue, 4)

	code, out, errOut := runMantisctl(t, "workflows", "replay-check", "--config", s.config, "--task-queue", queue)
	require.Equal(t, ExitOK, code, "%s\n%s", out, errOut)
	require.Regexp(t, `(?m)^ok\s+Deployment\s+`+deployment+`\s`, out)
	require.Regexp(t, `(?m)^ok\s+DeclareTopology\s+`+topology+`\s`, out)
	require.Regexp(t, `(?m)^ok\s+Dispatcher\s+`+dispatcher+`\s`, out)
	require.Regexp(t, `(?m)^not-started\s+Deployment\s+`+unrun+`\s`, out)
	require.Contains(t, out, "4 open executions in namespace "+s.srv.Namespace+" replayed: 3 ok, 0 failed, 1 not-started")

	code, out, _ = runMantisctl(t, "workflows", "replay-check", "--config", s.config, "--task-queue", queue, "--type", "DeclareTopology", "-o", "json")
	require.Equal(t, ExitOK, code)
	require.Contains(t, out, `"result": "ok"`)
	require.Contains(t, out, `"workflow_id": "`+topology+`"`)
	require.NotContains(t, out, deployment)

	code, _, errOut = runMantisctl(t, "workflows", "replay-check", "--config", s.config, "--task-queue", queue, "--limit", "3")
	require.Equal(t, ExitFailed, code)
	require.Contains(t, errOut, "more than 3 open executions: only the first 3 were replayed; raise --limit")

	code, _, errOut = runMantisctl(t, "workflows", "replay-check", "--config", s.config, "--type", "Deploy")
	require.Equal(t, ExitUsage, code)
	require.Contains(t, errOut, "--type Deploy: not one of Deployment, Dispatcher, DeclareTopology")
}

// A run recorded by other code under the Deployment type, as a workflow changed
// without workflow.GetVersion leaves it, fails to replay: the check names it with the
// nondeterminism error and exits 1.
func TestReplayCheckFailsAnExecutionThisCodeWouldBreak(t *testing.T) {
	t.Parallel()
	s := newReplayStack(t)
	queue := s.srv.TaskQueue
	other := func(ctx workflow.Context, _ workflows.DeploymentInput) error {
		return workflow.Sleep(ctx, time.Hour)
	}
	w := worker.New(s.client, queue, worker.Options{})
	w.RegisterWorkflowWithOptions(other, workflow.RegisterOptions{Name: workflows.DeploymentWorkflowType})
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)
	changed := workflows.DeploymentWorkflowID("replay-" + uuid.NewString())
	s.start(t, changed, queue, workflows.DeploymentWorkflowType, map[string]any{"name": "changed", "targets": []string{"web-1"}})
	s.waitListed(t, queue, 1, changed)

	code, out, errOut := runMantisctl(t, "workflows", "replay-check", "--config", s.config, "--task-queue", queue)
	require.Equal(t, ExitFailed, code, "%s\n%s", out, errOut)
	require.Regexp(t, `(?m)^failed\s+Deployment\s+`+changed+`\s`, out)
	require.Contains(t, out, "[TMPRL1100]", "the error is the nondeterminism the replay found")
	require.Contains(t, out, "1 open executions in namespace "+s.srv.Namespace+" replayed: 0 ok, 1 failed, 0 not-started")
	require.Contains(t, errOut, "1 of 1: open executions do not replay against this binary's workflows")
}
