package e2e_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/schema"
)

// The tests below run Mandible, Thorax and agents as OS processes, every gRPC link on
// mutual TLS from one development CA, against real PostgreSQL and Temporal. The
// handshake refusals of the agent links (Thorax's agents port without a client
// certificate, a listen agent facing another CA's Thorax) are covered by
// internal/thorax and internal/agent; Mandible's by cmd/mandible.

// commandTimeout bounds a wait for one command to be dispatched, run and stored.
const commandTimeout = 2 * time.Minute

// A command dispatched to a poll-mode target and one dispatched to a listen-mode
// target each run on their agent, with the request's environment and working
// directory, and Mandible stores exit code and output from the Thorax that held them.
func TestExecCommandsRunOnPollAndListenAgents(t *testing.T) {
	t.Parallel()
	s := setupExec(t)
	workDir := filepath.Join(t.TempDir(), "workdir")
	require.NoError(t, os.Mkdir(workDir, 0o755))

	pollReq := s.enqueue(t, schema.NewDispatchRequest{
		Target:     s.poll.Name,
		Command:    `echo "$GREETING from $(basename "$PWD")"; echo to-stderr >&2; exit 3`,
		Env:        map[string]string{"GREETING": "hello"},
		WorkingDir: workDir,
		Timeout:    time.Minute,
	})
	listenReq := s.enqueue(t, schema.NewDispatchRequest{
		Target:  s.listen.Name,
		Command: `echo "listen ran as $0"`,
		Timeout: time.Minute,
	})

	poll := s.waitCommand(t, pollReq, commandTimeout, "succeeded", "failed")
	require.Equal(t, "failed", poll.Status, "a non-zero exit fails the command")
	require.NotNil(t, poll.ExitCode)
	require.Equal(t, 3, *poll.ExitCode)
	require.NotNil(t, poll.Output)
	require.Equal(t, "hello from workdir\nto-stderr\n", *poll.Output)
	require.Nil(t, poll.Error, "the command ran; only its exit code failed it")
	require.Equal(t, s.instance, *poll.Holder)

	listen := s.waitCommand(t, listenReq, commandTimeout, "succeeded", "failed")
	require.Equal(t, "succeeded", listen.Status)
	require.NotNil(t, listen.ExitCode)
	require.Equal(t, 0, *listen.ExitCode)
	require.NotNil(t, listen.Output)
	require.Equal(t, "listen ran as /bin/sh\n", *listen.Output)
	require.Equal(t, s.instance, *listen.Holder)
}

// A command that outlives its timeout is killed with its whole process group, on
// either kind of agent: the stored result says it timed out, and the child it left
// running in the background is gone.
func TestExecTimeoutKillsTheCommandsProcessGroup(t *testing.T) {
	t.Parallel()
	s := setupExec(t)
	dir := t.TempDir()
	type run struct {
		request uuid.UUID
		pidFile string
	}
	runs := map[string]run{}
	for mode, target := range map[string]string{"poll": s.poll.Name, "listen": s.listen.Name} {
		pidFile := filepath.Join(dir, mode+".pid")
		runs[mode] = run{pidFile: pidFile, request: s.enqueue(t, schema.NewDispatchRequest{
			Target:  target,
			Command: fmt.Sprintf("sleep 300 & echo $! > %s; sleep 300", pidFile),
			Timeout: 2 * time.Second,
		})}
	}
	for mode, r := range runs {
		pid := readPIDFile(t, r.pidFile)
		cmd := s.waitCommand(t, r.request, commandTimeout, "succeeded", "failed")
		require.Equal(t, "failed", cmd.Status, mode)
		require.NotNil(t, cmd.Error, mode)
		require.Contains(t, *cmd.Error, "timed out after 2s", mode)
		require.Eventually(t, func() bool { return orphanGone(pid) }, 10*time.Second, 50*time.Millisecond,
			"%s: the background child %d of the timed-out command survived", mode, pid)
	}
}

// SIGKILL the Thorax that holds a listen-mode target while a deployment's command runs
// there: within Mandible's heartbeat timeout the instance is declared dead, the target
// is reassigned to the other, live Thorax (which then runs its commands), and the
// deployment is failed rather than retried, with events recording both.
func TestThoraxKilledMidDeploymentHandsItsListenTargetOverAndFailsTheDeployment(t *testing.T) {
	const heartbeatTimeout = 3 * time.Second
	c := setupExecCluster(t, heartbeatTimeout)
	doomed := c.startThorax(t)
	agent := c.startListenAgent(t)
	doomedID := c.waitRegistered(t, doomed)
	target := c.registerListenTarget(t, agent)
	require.NotNil(t, target.AssignedInstanceID)
	require.Equal(t, doomedID, *target.AssignedInstanceID, "registered while only the doomed Thorax lives: pinned to it")
	survivor := c.startThorax(t)
	survivorID := c.waitRegistered(t, survivor)

	deployment := uuid.New()
	_, err := c.pool.Exec(c.ctx, `
		INSERT INTO deployments (id, name, priority, status, spec, started_at)
		VALUES ($1, $2, 'normal', 'running', '{}', now())`, deployment, uniqueName("deploy"))
	require.NoError(t, err)
	step := 0
	pidFile := filepath.Join(t.TempDir(), "step.pid")
	req := c.enqueue(t, schema.NewDispatchRequest{
		Target: agent.Name, DeploymentID: &deployment, StepPosition: &step,
		Command: fmt.Sprintf("echo $$ > %s; sleep 60", pidFile), Timeout: 2 * time.Minute,
	})
	running := c.waitCommand(t, req, commandTimeout, "running")
	require.Equal(t, doomedID, *running.Holder, "only the instance the target is pinned to runs its commands")
	readPIDFile(t, pidFile) // the agent has started it

	killedAt := time.Now()
	doomed.kill(t)
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		var assigned *uuid.UUID
		require.NoError(ct, c.pool.QueryRow(c.ctx, `SELECT assigned_instance_id FROM targets WHERE name = $1`, agent.Name).Scan(&assigned))
		require.NotNil(ct, assigned)
		require.Equal(ct, survivorID, *assigned)
	}, time.Minute, 50*time.Millisecond, "the listen target was not reassigned to the live Thorax")
	took := time.Since(killedAt)
	t.Logf("listen target reassigned %s after SIGKILL (heartbeat timeout %s)", took.Round(10*time.Millisecond), heartbeatTimeout)
	// Mandible checks heartbeats every timeout/5: the hand-over follows the timeout, not
	// some slower sweep.
	require.Less(t, took, 4*heartbeatTimeout)

	var instanceStatus string
	require.NoError(t, c.pool.QueryRow(c.ctx, `SELECT status FROM thorax_instances WHERE id = $1`, doomedID).Scan(&instanceStatus))
	require.Equal(t, "dead", instanceStatus)

	var depStatus, depError string
	require.NoError(t, c.pool.QueryRow(c.ctx, `SELECT status, coalesce(error, '') FROM deployments WHERE id = $1`, deployment).Scan(&depStatus, &depError))
	require.Equal(t, "failed", depStatus)
	require.Contains(t, depError, doomed.Name)
	lost := c.waitCommand(t, req, time.Second, "lost")
	require.Contains(t, *lost.Error, "stopped heartbeating")
	var reqStatus string
	require.NoError(t, c.pool.QueryRow(c.ctx, `SELECT status FROM pending_dispatch_requests WHERE id = $1`, req).Scan(&reqStatus))
	require.Equal(t, "failed", reqStatus, "not retried")

	reassigned := eventData(t, c, `type = 'target.reassigned' AND data->>'target' = $1`, agent.Name)
	require.Equal(t, doomedID.String(), reassigned["from_instance_id"])
	require.Equal(t, survivorID.String(), reassigned["to_instance_id"])
	failed := eventData(t, c, `type = 'deployment.failed' AND deployment_id = $1`, deployment)
	require.Equal(t, doomedID.String(), failed["instance_id"])
	require.Contains(t, failed["reason"], "not retried")

	// The survivor now serves the target.
	after := c.enqueue(t, schema.NewDispatchRequest{Target: agent.Name, Command: "echo after failover", Timeout: time.Minute})
	done := c.waitCommand(t, after, commandTimeout, "succeeded", "failed")
	require.Equal(t, "succeeded", done.Status)
	require.Equal(t, survivorID, *done.Holder)
	require.Equal(t, "after failover\n", *done.Output)
}

// eventData returns the data of the one deployment event matching where.
func eventData(t *testing.T, c *execCluster, where string, args ...any) map[string]any {
	t.Helper()
	var (
		n   int
		raw []byte
	)
	require.NoError(t, c.pool.QueryRow(c.ctx, `SELECT count(*) OVER (), data FROM deployment_events WHERE `+where, args...).Scan(&n, &raw))
	require.Equal(t, 1, n, "events matching %s", where)
	var data map[string]any
	require.NoError(t, json.Unmarshal(raw, &data))
	return data
}

// readPIDFile waits for a command to write its pid file and returns the pid.
func readPIDFile(t *testing.T, path string) int {
	t.Helper()
	var pid int
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		b, err := os.ReadFile(path)
		require.NoError(ct, err)
		require.True(ct, bytes.HasSuffix(b, []byte("\n")), "pid file not complete yet")
		pid, err = strconv.Atoi(strings.TrimSpace(string(b)))
		require.NoError(ct, err)
	}, commandTimeout, 50*time.Millisecond, "the command never wrote %s", path)
	return pid
}

// orphanGone reports whether the `sleep 300` with this pid has ended: no such process,
// a zombie waiting for whoever adopted it to reap it, or the pid reused by another
// program.
func orphanGone(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	// The state follows the command name, which is in parentheses and may hold spaces.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 || i+2 >= len(stat) {
		return false
	}
	if state := stat[i+2]; state == 'Z' || state == 'X' {
		return true
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return true
	}
	return !bytes.Equal(cmdline, []byte("sleep\x00300\x00"))
}
