package e2e_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/mantis-deploy/mantis/internal/devcerts"
	"github.com/mantis-deploy/mantis/internal/testrig/testenv"
	"github.com/mantis-deploy/mantis/schema"
)

// The rules of "Who settles what nobody reports" that need a process stopped,
// frozen or drained past a bound: each on its own cluster of Mantis processes.

// setupExecClusterWith is setupExecCluster with more environment for Mandible
// (MANTIS_ overrides of its file).
func setupExecClusterWith(t *testing.T, heartbeatTimeout time.Duration, env ...string) *execCluster {
	t.Helper()
	ctx := context.Background()
	url := testenv.DatabaseURL(t)
	pool, err := pgxpool.New(ctx, url)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	dir := t.TempDir()
	certs, err := devcerts.Generate(filepath.Join(dir, "certs"), []string{"localhost", "127.0.0.1"})
	require.NoError(t, err)
	c := &execCluster{ctx: ctx, dir: dir, pool: pool, certs: certs, heartbeatTimeout: heartbeatTimeout}
	c.mandibleOptions = replicaOptions{
		ID: uniqueName("exec"), DatabaseURL: url, Temporal: testenv.TemporalServer(t), PollInterval: "2s", Env: env,
	}
	c.mandible = startSecureReplica(t, c.mandibleOptions, certs, heartbeatTimeout)
	return c
}

// deployOn creates a deployment of steps (JSON objects) on target and waits
// until its first command runs; it returns the deployment's id and that
// command.
func (c *execCluster) deployOn(t *testing.T, target string, steps string) (string, storedCommand) {
	t.Helper()
	spec := fmt.Sprintf(`{"name":%q,"targets":[%q],"steps":[%s]}`, uniqueName("rule"), target, steps)
	code, created := api(t, c.mandible.replica, http.MethodPost, "/api/v1/deployments", spec)
	require.Equal(t, http.StatusAccepted, code, created)
	id := created["id"].(string)
	var cmd storedCommand
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		require.NoError(ct, c.pool.QueryRow(c.ctx, `
			SELECT id, status, holder_instance_id FROM command_queue WHERE deployment_id = $1 AND status = 'running'`, id).
			Scan(&cmd.ID, &cmd.Status, &cmd.Holder))
	}, startTimeout, 100*time.Millisecond, "the deployment's command never ran")
	return id, cmd
}

// settledCommand is what Mandible recorded of a command and of its dispatch
// request once it was settled.
type settledCommand struct {
	status, requestStatus string
	err                   *string
	attempts, deliveries  int
}

func (c *execCluster) settled(t *testing.T, command uuid.UUID) settledCommand {
	t.Helper()
	var s settledCommand
	require.NoError(t, c.pool.QueryRow(c.ctx, `
		SELECT c.status, c.error, p.status, p.attempts,
		       (SELECT count(*) FROM command_queue o WHERE o.dispatch_request_id = p.id)
		FROM command_queue c JOIN pending_dispatch_requests p ON p.id = c.dispatch_request_id
		WHERE c.id = $1`, command).Scan(&s.status, &s.err, &s.requestStatus, &s.attempts, &s.deliveries))
	return s
}

// waitWorkflowClosed waits until the deployment's workflow is no longer running.
func waitWorkflowClosed(t *testing.T, deployment string) enumspb.WorkflowExecutionStatus {
	t.Helper()
	tc, err := client.Dial(client.Options{HostPort: testenv.TemporalServer(t).Address, Namespace: testenv.TemporalServer(t).Namespace})
	require.NoError(t, err)
	defer tc.Close()
	var st enumspb.WorkflowExecutionStatus
	require.Eventually(t, func() bool {
		d, err := rawDescription(tc.DescribeWorkflow(context.Background(), "deployment:"+deployment, ""))
		require.NoError(t, err)
		st = d.GetWorkflowExecutionInfo().GetStatus()
		return st != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING
	}, time.Minute, 200*time.Millisecond, "the deployment's workflow kept running")
	return st
}

// assignedTo reads the instance a target is assigned to (nil for none).
func (c *execCluster) assignedTo(ct require.TestingT, target string) *uuid.UUID {
	var assigned *uuid.UUID
	require.NoError(ct, c.pool.QueryRow(c.ctx, `SELECT assigned_instance_id FROM targets WHERE name = $1`, target).Scan(&assigned))
	return assigned
}

// A Thorax drained (SIGTERM) while its listen target runs a command longer than
// the drain's timeout gives up on the call and exits without a report. Its
// listen target moved at the drain's start; once the instance is silent past
// the heartbeat timeout the dead-instance rule applies: the command is lost,
// its request failed after one delivery (not retried), and the deployment
// fails without running its next step.
func TestDrainEndingWithoutAReportFallsUnderTheDeadInstanceRule(t *testing.T) {
	t.Parallel()
	const heartbeatTimeout = 3 * time.Second
	c := setupExecCluster(t, heartbeatTimeout)
	drained := c.startThorax(t) // drain timeout 5s
	drainedID := c.waitRegistered(t, drained)
	agent := c.startListenAgent(t)
	c.registerListenTarget(t, agent)
	other := c.startThorax(t)
	otherID := c.waitRegistered(t, other)

	started := filepath.Join(c.dir, "started")
	id, cmd := c.deployOn(t, agent.Name,
		fmt.Sprintf(`{"name":"long","command":"touch %s; sleep 120","timeout":"10m"},{"name":"never","command":"true"}`, started))
	require.Equal(t, drainedID, *cmd.Holder)
	// Drain only once the agent runs the command: a claim still on its way to
	// Thorax is not what this test is about.
	require.Eventually(t, func() bool { _, err := os.Stat(started); return err == nil }, startTimeout, 50*time.Millisecond,
		"the agent never started the command")

	require.NoError(t, syscall.Kill(drained.Pid(), syscall.SIGTERM))
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		assigned := c.assignedTo(ct, agent.Name)
		require.NotNil(ct, assigned)
		require.Equal(ct, otherID, *assigned)
	}, time.Minute, 50*time.Millisecond, "the draining instance kept its listen target")
	require.Eventually(t, drained.exited, time.Minute, 50*time.Millisecond, "the drain never ended")
	require.Contains(t, drained.log(), "drain timed out: abandoning commands still out to agents")

	waitDeployment(t, c.mandible.replica, id, "failed")
	var status string
	require.NoError(t, c.pool.QueryRow(c.ctx, `SELECT status FROM thorax_instances WHERE id = $1`, drainedID).Scan(&status))
	require.Equal(t, "dead", status, "the instance that drained without a report was declared dead")
	s := c.settled(t, cmd.ID)
	require.Equal(t, "lost", s.status)
	require.NotNil(t, s.err)
	require.Equal(t, "failed", s.requestStatus, "the request is failed, not retried")
	require.Equal(t, 1, s.deliveries, "one delivery: nothing dispatched it again")
	var commands int
	require.NoError(t, c.pool.QueryRow(c.ctx, `SELECT count(*) FROM command_queue WHERE deployment_id = $1`, id).Scan(&commands))
	require.Equal(t, 1, commands, "the deployment's next step never ran")
	require.Equal(t, enumspb.WORKFLOW_EXECUTION_STATUS_FAILED, waitWorkflowClosed(t, id), "the workflow was told and ended failed")
}

// A command whose agent is frozen (SIGSTOP) while its Thorax stays live never
// reports. Past its timeout plus Mandible's thorax.result_grace the monitor
// fails it with "no result within timeout + grace", no instance is declared
// dead, and the deployment's workflow reads that result and ends failed.
func TestCommandWithNoResultPastTimeoutPlusGraceIsFailedEndToEnd(t *testing.T) {
	t.Parallel()
	const heartbeatTimeout = 3 * time.Second
	c := setupExecClusterWith(t, heartbeatTimeout, "MANTIS_THORAX_RESULT_GRACE=2s")
	th := c.startThorax(t)
	instance := c.waitRegistered(t, th)
	agent := c.startListenAgent(t)
	c.registerListenTarget(t, agent)

	started := filepath.Join(c.dir, "started")
	id, cmd := c.deployOn(t, agent.Name,
		fmt.Sprintf(`{"name":"silent","command":"touch %s; sleep 20","timeout":"3s"},{"name":"never","command":"true"}`, started))
	require.Equal(t, instance, *cmd.Holder)
	// Freeze the agent only once it runs the command: frozen before the hand-off,
	// the hand-off fails and the command is dispatched again, which is not what
	// this test is about (and its backoff outlasts the test's wait).
	require.Eventually(t, func() bool { _, err := os.Stat(started); return err == nil }, startTimeout, 50*time.Millisecond,
		"the agent never started the command")
	require.NoError(t, syscall.Kill(agent.Pid(), syscall.SIGSTOP))
	t.Cleanup(func() { _ = syscall.Kill(agent.Pid(), syscall.SIGCONT) })

	waitDeployment(t, c.mandible.replica, id, "failed")
	s := c.settled(t, cmd.ID)
	require.Equal(t, "failed", s.status)
	require.NotNil(t, s.err)
	require.Contains(t, *s.err, schema.OverdueReason)
	require.Equal(t, 1, s.deliveries, "the overdue command was failed, not dispatched again")
	require.Equal(t, enumspb.WORKFLOW_EXECUTION_STATUS_FAILED, waitWorkflowClosed(t, id),
		"the workflow read the failure like any result and ended failed")
	var commands, dead int
	require.NoError(t, c.pool.QueryRow(c.ctx, `SELECT count(*) FROM command_queue WHERE deployment_id = $1`, id).Scan(&commands))
	require.Equal(t, 1, commands, "the deployment's next step never ran")
	require.NoError(t, c.pool.QueryRow(c.ctx, `SELECT count(*) FROM thorax_instances WHERE status = 'dead'`).Scan(&dead))
	require.Zero(t, dead, "the holder stayed live: only the command was settled")
	require.Contains(t, c.mandible.log(), "failed commands with no result within timeout + grace")
}

// The only Thorax frozen (SIGSTOP) past its heartbeat timeout is declared dead,
// and its listen target is left with no live instance. Thawed, the same process
// registers again under a new instance id and gets its listen target back, and
// a later deployment to that target succeeds through it.
func TestOnlyThoraxMarkedDeadThenThawedRegistersAgainAndServesItsTarget(t *testing.T) {
	t.Parallel()
	const heartbeatTimeout = 3 * time.Second
	c := setupExecCluster(t, heartbeatTimeout)
	th := c.startThorax(t)
	firstID := c.waitRegistered(t, th)
	agent := c.startListenAgent(t)
	c.registerListenTarget(t, agent)

	require.NoError(t, syscall.Kill(th.Pid(), syscall.SIGSTOP))
	t.Cleanup(func() { _ = syscall.Kill(th.Pid(), syscall.SIGCONT) })
	require.Eventually(t, func() bool {
		var status string
		require.NoError(t, c.pool.QueryRow(c.ctx, `SELECT status FROM thorax_instances WHERE id = $1`, firstID).Scan(&status))
		return status == "dead"
	}, time.Minute, 100*time.Millisecond, "the frozen instance was never declared dead")
	require.Nil(t, c.assignedTo(t, agent.Name), "no live instance could take the target")
	require.NoError(t, syscall.Kill(th.Pid(), syscall.SIGCONT))

	var secondID uuid.UUID
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		require.NoError(ct, c.pool.QueryRow(c.ctx, `SELECT id FROM thorax_instances WHERE name = $1 AND status = 'live'`, th.Name).Scan(&secondID))
	}, time.Minute, 100*time.Millisecond, "the thawed Thorax never registered again")
	require.NotEqual(t, firstID, secondID, "a dead instance id is never live again")
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		assigned := c.assignedTo(ct, agent.Name)
		require.NotNil(ct, assigned)
		require.Equal(ct, secondID, *assigned)
	}, time.Minute, 100*time.Millisecond, "the listen target stayed stranded")

	spec := fmt.Sprintf(`{"name":"after","targets":[%q],"steps":[{"name":"hi","command":"echo hi"}]}`, agent.Name)
	code, created := api(t, c.mandible.replica, http.MethodPost, "/api/v1/deployments", spec)
	require.Equal(t, http.StatusAccepted, code, created)
	waitDeployment(t, c.mandible.replica, created["id"].(string), "succeeded")
	var holder uuid.UUID
	require.NoError(t, c.pool.QueryRow(c.ctx, `SELECT holder_instance_id FROM command_queue WHERE deployment_id = $1`, created["id"]).Scan(&holder))
	require.Equal(t, secondID, holder, "the thawed Thorax ran it")
}
