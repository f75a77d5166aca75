package e2e_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/mantis-deploy/mantis/internal/testrig/testenv"
	"github.com/mantis-deploy/mantis/schema"
)

// livenessSetup is a cluster with one Thorax serving a poll-mode and a listen-mode
// agent, both targets assigned.
type livenessSetup struct {
	*execCluster
	thorax *thoraxProcess
	poll   *mantisProcess
	listen *listenAgentProcess
}

func setupLiveness(t *testing.T, heartbeatTimeout time.Duration) livenessSetup {
	t.Helper()
	c := setupExecCluster(t, heartbeatTimeout)
	th := c.startThorax(t)
	id := c.waitRegistered(t, th)
	s := livenessSetup{execCluster: c, thorax: th, poll: c.startPollAgent(t, th), listen: c.startListenAgent(t)}
	c.registerListenTarget(t, s.listen)
	c.waitPollTarget(t, s.poll, id)
	return s
}

// deploy submits a one-step deployment of command on both targets and waits until
// both commands run.
func (s livenessSetup) deploy(t *testing.T, command string) string {
	t.Helper()
	spec := fmt.Sprintf(`{"name":%q,"targets":[%q,%q],"steps":[{"name":"work","command":%q,"timeout":"5m"}]}`,
		uniqueName("live"), s.poll.Name, s.listen.Name, command)
	code, created := api(t, s.mandible.replica, http.MethodPost, "/api/v1/deployments", spec)
	require.Equal(t, http.StatusAccepted, code, created)
	id := created["id"].(string)
	require.Eventually(t, func() bool {
		var running int
		require.NoError(t, s.pool.QueryRow(s.ctx, `SELECT count(*) FROM command_queue WHERE deployment_id = $1 AND status = 'running'`, id).Scan(&running))
		return running == 2
	}, startTimeout, 100*time.Millisecond, "the deployment's commands never ran")
	return id
}

func (s livenessSetup) requireNoDeadInstance(t *testing.T) {
	t.Helper()
	var dead int
	require.NoError(t, s.pool.QueryRow(s.ctx, `SELECT count(*) FROM thorax_instances WHERE status = 'dead'`).Scan(&dead))
	require.Zero(t, dead, "a Thorax was declared dead")
}

// A single Mandible frozen (SIGSTOP) for 45 s — fifteen heartbeat timeouts — while a
// deployment runs fails nothing when it resumes: its monitor's clock restarts with
// its recovery, so Thorax has a whole timeout to heartbeat again. The commands that
// finished meanwhile are stored once Mandible answers.
func TestMandibleFrozenMidDeploymentFailsNothing(t *testing.T) {
	t.Parallel()
	const heartbeatTimeout = 3 * time.Second
	s := setupLiveness(t, heartbeatTimeout)
	id := s.deploy(t, "sleep 5; echo done")

	pid := s.mandible.cmd.Process.Pid
	require.NoError(t, syscall.Kill(pid, syscall.SIGSTOP))
	frozen := time.After(45 * time.Second)
	<-frozen
	var thawed time.Time
	require.NoError(t, s.pool.QueryRow(s.ctx, `SELECT now()`).Scan(&thawed))
	require.NoError(t, syscall.Kill(pid, syscall.SIGCONT))

	waitDeployment(t, s.mandible.replica, id, "succeeded")
	// The deployment can succeed before the monitor judges anyone: wait until
	// Thorax's first heartbeat after the thaw has landed and the monitor has
	// judged the instances after its grace, so that a false verdict is seen.
	s.waitJudgedSince(t, thawed, heartbeatTimeout)
	s.requireNoDeadInstance(t)
	require.Contains(t, s.mandible.log(), "replica recovering")
}

// monitorTickBound is more than two of the monitor's ticks at the tests'
// heartbeat timeouts (a tick is a fifth of the timeout), so that a replica
// heartbeat recorded that long after the end of the grace comes from a tick
// after the one that judged.
const monitorTickBound = 2 * time.Second

// waitJudgedSince waits until Thorax heartbeat after since and until the
// replica's monitor, having recovered after since, has judged the instances
// at least once after its grace of a whole heartbeat timeout: its row was
// heartbeat later than the end of the grace plus two ticks.
func (s livenessSetup) waitJudgedSince(t *testing.T, since time.Time, heartbeatTimeout time.Duration) {
	t.Helper()
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		var beat time.Time
		require.NoError(ct, s.pool.QueryRow(s.ctx, `SELECT last_heartbeat_at FROM thorax_instances WHERE name = $1`, s.thorax.Name).Scan(&beat))
		require.True(ct, beat.After(since), "no Thorax heartbeat since the thaw yet")
		var healthySince, lastSeen time.Time
		require.NoError(ct, s.pool.QueryRow(s.ctx, `SELECT healthy_since, last_seen_at FROM mandible_replicas WHERE id = $1`, s.mandible.ID).
			Scan(&healthySince, &lastSeen))
		require.True(ct, healthySince.After(since), "the replica has not recorded its recovery yet")
		require.GreaterOrEqual(ct, lastSeen.Sub(healthySince), heartbeatTimeout+monitorTickBound, "the monitor has not judged since its recovery yet")
	}, time.Minute, 100*time.Millisecond, "the monitor never judged the instances after the thaw")
}

// A single Mandible stopped mid-deployment for several heartbeat timeouts and started
// again fails nothing either.
func TestMandibleStoppedMidDeploymentFailsNothing(t *testing.T) {
	t.Parallel()
	const heartbeatTimeout = 3 * time.Second
	s := setupLiveness(t, heartbeatTimeout)
	id := s.deploy(t, "sleep 5; echo done")

	addr, httpAddr := s.mandible.GRPCAddr, s.mandible.HTTPAddr
	s.mandible.stop(t)
	var succeeded int
	require.Eventually(t, func() bool {
		// The agents finish while Mandible is away; Thorax holds their results.
		return strings.Contains(s.thorax.log(), "heartbeat failed")
	}, time.Minute, 100*time.Millisecond)
	// Long enough for gRPC's default reconnect backoff to grow past the timeout.
	<-time.After(10 * heartbeatTimeout)
	o := s.mandibleOptions
	_, port, err := net.SplitHostPort(httpAddr)
	require.NoError(t, err)
	o.HTTPPort, err = strconv.Atoi(port)
	require.NoError(t, err)
	s.mandible = startSecureReplicaAt(t, o, s.certs, heartbeatTimeout, addr)

	waitDeployment(t, s.mandible.replica, id, "succeeded")
	require.NoError(t, s.pool.QueryRow(s.ctx, `SELECT count(*) FROM command_queue WHERE deployment_id = $1 AND status = 'succeeded'`, id).Scan(&succeeded))
	require.Equal(t, 2, succeeded)
	s.requireNoDeadInstance(t)
}

// The only Thorax is SIGKILLed: it is declared dead with no live instance to take its
// listen target. A new Thorax registering gets the target, and the next deployment
// to it succeeds instead of waiting for "no live Thorax" until its budget runs out.
func TestOnlyThoraxKilledThenReplacedServesItsListenTargetAgain(t *testing.T) {
	t.Parallel()
	const heartbeatTimeout = 3 * time.Second
	c := setupExecCluster(t, heartbeatTimeout)
	first := c.startThorax(t)
	firstID := c.waitRegistered(t, first)
	agent := c.startListenAgent(t)
	c.registerListenTarget(t, agent)
	first.kill(t)
	require.Eventually(t, func() bool {
		var status string
		require.NoError(t, c.pool.QueryRow(c.ctx, `SELECT status FROM thorax_instances WHERE id = $1`, firstID).Scan(&status))
		return status == "dead"
	}, time.Minute, 100*time.Millisecond)

	second := c.startThorax(t)
	secondID := c.waitRegistered(t, second)
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		var assigned *string
		require.NoError(ct, c.pool.QueryRow(c.ctx, `SELECT assigned_instance_id::text FROM targets WHERE name = $1`, agent.Name).Scan(&assigned))
		require.NotNil(ct, assigned)
		require.Equal(ct, secondID.String(), *assigned)
	}, time.Minute, 100*time.Millisecond, "the listen target stayed stranded")

	spec := fmt.Sprintf(`{"name":"after","targets":[%q],"steps":[{"name":"hi","command":"echo hi"}]}`, agent.Name)
	code, created := api(t, c.mandible.replica, http.MethodPost, "/api/v1/deployments", spec)
	require.Equal(t, http.StatusAccepted, code, created)
	waitDeployment(t, c.mandible.replica, created["id"].(string), "succeeded")
}

// A Thorax SIGKILLed with a deployment's command in flight fails the deployment (the
// seed's rule). The deployment's workflow is told: it ends failed, and the command
// the deployment still had running on the other Thorax's agent is cancelled, so
// nothing is left running.
func TestMonitorFailedDeploymentsWorkflowEndsAndNothingIsLeftRunning(t *testing.T) {
	t.Parallel()
	const heartbeatTimeout = 3 * time.Second
	c := setupExecCluster(t, heartbeatTimeout)
	doomed := c.startThorax(t)
	c.waitRegistered(t, doomed)
	listen := c.startListenAgent(t)
	c.registerListenTarget(t, listen)
	survivor := c.startThorax(t)
	survivorID := c.waitRegistered(t, survivor)
	poll := c.startPollAgent(t, survivor)
	c.waitPollTarget(t, poll, survivorID)

	spec := fmt.Sprintf(`{"name":"doomed","targets":[%q,%q],"steps":[{"name":"long","command":"sleep 300","timeout":"10m"},{"name":"never","command":"true"}]}`,
		poll.Name, listen.Name)
	code, created := api(t, c.mandible.replica, http.MethodPost, "/api/v1/deployments", spec)
	require.Equal(t, http.StatusAccepted, code, created)
	id := created["id"].(string)
	require.Eventually(t, func() bool {
		var running int
		require.NoError(t, c.pool.QueryRow(c.ctx, `SELECT count(*) FROM command_queue WHERE deployment_id = $1 AND status = 'running'`, id).Scan(&running))
		return running == 2
	}, startTimeout, 100*time.Millisecond)

	doomed.kill(t)
	waitDeployment(t, c.mandible.replica, id, "failed")

	tc, err := client.Dial(client.Options{HostPort: testenv.TemporalServer(t).Address, Namespace: testenv.TemporalServer(t).Namespace})
	require.NoError(t, err)
	defer tc.Close()
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		// A describe that times out on a loaded Temporal is asked again, not fatal.
		d, err := rawDescription(tc.DescribeWorkflow(context.Background(), "deployment:"+id, ""))
		require.NoError(ct, err)
		require.Equal(ct, enumspb.WORKFLOW_EXECUTION_STATUS_FAILED, d.GetWorkflowExecutionInfo().GetStatus())
	}, time.Minute, 200*time.Millisecond, "the workflow of the failed deployment kept running")

	var running, notices int
	require.Eventually(t, func() bool {
		require.NoError(t, c.pool.QueryRow(c.ctx, `
			SELECT count(*) FROM command_queue WHERE deployment_id = $1 AND status IN ('queued', 'running')`, id).Scan(&running))
		return running == 0
	}, time.Minute, 200*time.Millisecond, "commands of the failed deployment are still queued or running")
	var statuses []string
	rows, err := c.pool.Query(c.ctx, `SELECT status FROM command_queue WHERE deployment_id = $1 ORDER BY status`, id)
	require.NoError(t, err)
	for rows.Next() {
		var st string
		require.NoError(t, rows.Scan(&st))
		statuses = append(statuses, st)
	}
	require.NoError(t, rows.Err())
	require.Equal(t, []string{"cancelled", "lost"}, statuses, "the poll target's command cancelled, the dead Thorax's lost; the next step never ran")
	require.NoError(t, c.pool.QueryRow(c.ctx, `SELECT count(*) FROM deployment_workflow_notices`).Scan(&notices))
	require.Zero(t, notices)
	var depStatus string
	require.NoError(t, c.pool.QueryRow(c.ctx, `SELECT status FROM deployments WHERE id = $1`, id).Scan(&depStatus))
	require.Equal(t, "failed", depStatus, "the workflow ended with the status the database holds")
}

// A SIGKILLed replica leaves its dispatcher workflow Running in Temporal; a live
// replica terminates it once the dead one has been silent for half of
// processing_timeout, with a reason the Web UI shows.
func TestSIGKILLedReplicasDispatcherIsEndedByASurvivor(t *testing.T) {
	t.Parallel()
	f := setupDispatchFixture(t, 1)
	prefix := uniqueName("gone")
	opts := func(id string) replicaOptions {
		return replicaOptions{ID: id, DatabaseURL: f.url, Temporal: f.temporal, PollInterval: "1s", ProcessingTimeout: "8s"}
	}
	doomed := startReplica(t, opts(prefix+"-doomed"))
	survivor := startReplica(t, opts(prefix+"-survivor"))
	tc, err := client.Dial(client.Options{HostPort: f.temporal.Address, Namespace: f.temporal.Namespace})
	require.NoError(t, err)
	defer tc.Close()
	workflowID := "dispatcher:" + doomed.ID
	require.Eventually(t, func() bool {
		d, err := rawDescription(tc.DescribeWorkflow(f.ctx, workflowID, ""))
		return err == nil && d.GetWorkflowExecutionInfo().GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING
	}, time.Minute, 100*time.Millisecond)

	doomed.kill(t)
	killed := time.Now()
	require.Eventually(t, func() bool {
		d, err := rawDescription(tc.DescribeWorkflow(f.ctx, workflowID, ""))
		require.NoError(t, err)
		return d.GetWorkflowExecutionInfo().GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED
	}, time.Minute, 200*time.Millisecond, "the dead replica's dispatcher kept running")
	t.Logf("dispatcher of the SIGKILLed replica ended %s after the kill (processing_timeout 8s)", time.Since(killed).Round(100*time.Millisecond))

	iter := tc.GetWorkflowHistory(f.ctx, workflowID, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_CLOSE_EVENT)
	require.True(t, iter.HasNext())
	last, err := iter.Next()
	require.NoError(t, err)
	reason := last.GetWorkflowExecutionTerminatedEventAttributes().GetReason()
	require.Contains(t, reason, doomed.ID+" silent since")
	require.Contains(t, reason, "ended by replica "+survivor.ID)
	var endedBy string
	require.NoError(t, f.pool.QueryRow(f.ctx, `SELECT ended_by FROM mandible_replicas WHERE id = $1`, doomed.ID).Scan(&endedBy))
	require.Equal(t, survivor.ID, endedBy)

	d, err := rawDescription(tc.DescribeWorkflow(f.ctx, "dispatcher:"+survivor.ID, ""))
	require.NoError(t, err)
	require.Equal(t, enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, d.GetWorkflowExecutionInfo().GetStatus(), "the survivor's own dispatcher runs on")
}

// A Thorax drained with SIGTERM while its listen target runs a command finishes and
// reports that command; its listen target moves to the other Thorax at once, so the
// next command runs there without waiting for the drain. Nothing fails and no retry
// is spent: a drain costs no attempt.
func TestDrainedThoraxFinishesItsCommandAndHandsItsTargetOverAtNoCost(t *testing.T) {
	t.Parallel()
	const heartbeatTimeout = 3 * time.Second
	c := setupExecCluster(t, heartbeatTimeout)
	// The first command runs until the test has seen its target move (a gate file), so
	// the drain must outlast however long that takes on a loaded machine.
	c.thoraxDrainTimeout = "90s"
	drained := c.startThorax(t)
	drainedID := c.waitRegistered(t, drained)
	agent := c.startListenAgent(t)
	c.registerListenTarget(t, agent)
	other := c.startThorax(t)
	otherID := c.waitRegistered(t, other)

	gate := filepath.Join(t.TempDir(), "gate")
	first := c.enqueue(t, schema.NewDispatchRequest{Target: agent.Name, Timeout: time.Minute,
		Command: fmt.Sprintf("while [ ! -e %s ]; do sleep 0.1; done; echo first", gate)})
	running := c.waitCommand(t, first, commandTimeout, "running")
	require.Equal(t, drainedID, *running.Holder)

	require.NoError(t, syscall.Kill(drained.Pid(), syscall.SIGTERM))
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		var assigned *uuid.UUID
		require.NoError(ct, c.pool.QueryRow(c.ctx, `SELECT assigned_instance_id FROM targets WHERE name = $1`, agent.Name).Scan(&assigned))
		require.NotNil(ct, assigned)
		require.Equal(ct, otherID, *assigned)
	}, time.Minute, 50*time.Millisecond, "the draining instance kept its listen target")
	require.False(t, drained.exited(), "the target moved at the drain's start, not when the instance was gone")
	second := c.enqueue(t, schema.NewDispatchRequest{Target: agent.Name, Command: "echo second", Timeout: time.Minute})
	require.NoError(t, os.WriteFile(gate, nil, 0o600), "opening the first command's gate")

	done := c.waitCommand(t, first, time.Minute, "succeeded", "failed", "lost")
	require.Equal(t, "succeeded", done.Status, "the draining instance finished and reported")
	require.Equal(t, "first\n", *done.Output)
	next := c.waitCommand(t, second, time.Minute, "succeeded", "failed", "lost")
	require.Equal(t, "succeeded", next.Status)
	require.Equal(t, otherID, *next.Holder)

	var attempts, commands int
	require.NoError(t, c.pool.QueryRow(c.ctx, `SELECT coalesce(sum(attempts), 0) FROM pending_dispatch_requests WHERE id = ANY($1)`,
		[]uuid.UUID{first, second}).Scan(&attempts))
	require.Zero(t, attempts, "a drain costs no attempt")
	require.NoError(t, c.pool.QueryRow(c.ctx, `SELECT count(*) FROM command_queue WHERE dispatch_request_id = ANY($1)`,
		[]uuid.UUID{first, second}).Scan(&commands))
	require.Equal(t, 2, commands, "one delivery each")
	require.Eventually(t, drained.exited, time.Minute, 50*time.Millisecond)
}
