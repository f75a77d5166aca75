package e2e_test

import (
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

	"github.com/mantis-deploy/mantis/internal/config"
	"github.com/mantis-deploy/mantis/internal/domain"
	"github.com/mantis-deploy/mantis/internal/testrig/devstack"
	"github.com/mantis-deploy/mantis/internal/testrig/testenv"
	"github.com/mantis-deploy/mantis/internal/thorax"
	"github.com/mantis-deploy/mantis/schema"
)

// startThoraxAt runs a Thorax against the rig serving agents on addr, until
// the test ends or stop is called; stop drains it and returns once it has
// stopped.
func (r *resultRig) startThoraxAt(t *testing.T, name, addr string) (th *thorax.Thorax, stop func()) {
	t.Helper()
	cfg := config.DefaultThorax()
	cfg.Name = name
	cfg.Mandible = config.Endpoint{Address: r.addr, TLS: config.TLS{Insecure: true}}
	cfg.Agents.Listen = addr
	cfg.Agents.Insecure = true
	cfg.Queue.Enabled = false
	cfg.Polling.Interval.Duration = 100 * time.Millisecond
	cfg.Heartbeat.Interval.Duration = time.Second
	cfg.Drain.Timeout.Duration = 2 * time.Second
	require.NoError(t, cfg.Validate())
	th, err := thorax.New(cfg, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- th.Run(ctx) }()
	var stopped error
	var once bool
	stop = func() {
		cancel()
		if once {
			return
		}
		once = true
		select {
		case stopped = <-done:
		case <-time.After(brokerWait):
			t.Error("thorax did not stop")
		}
	}
	t.Cleanup(func() {
		stop()
		require.NoError(t, stopped)
	})
	select {
	case <-th.Ready():
	case err := <-done:
		t.Fatalf("thorax stopped before it was ready: %v", err)
	case <-time.After(brokerWait):
		t.Fatal("thorax did not become ready")
	}
	return th, stop
}

// dispatchCommand is the rig's dispatch with a command of the test's.
func (r *resultRig) dispatchCommand(t *testing.T, instance, command string) uuid.UUID {
	t.Helper()
	_, err := r.pool.Exec(r.ctx, `UPDATE targets SET assigned_instance_id = $1 WHERE name = 'web-1'`, instance)
	require.NoError(t, err)
	_, err = schema.EnqueueDispatchRequests(r.ctx, r.pool, []schema.NewDispatchRequest{{IdempotencyKey: uuid.NewString(), Target: "web-1", Command: command, Priority: "normal"}})
	require.NoError(t, err)
	claim, err := schema.ClaimPending(r.ctx, r.pool, "r1", 10)
	require.NoError(t, err)
	require.Len(t, claim.Claimed, 1)
	out, err := schema.DeliverClaimed(r.ctx, r.pool, "r1", refs(claim.Claimed), schema.DeliverOptions{HeartbeatTimeout: time.Hour})
	require.NoError(t, err)
	require.Equal(t, domain.OutcomeDispatched, out[0].Outcome, out[0].Error)
	return *out[0].CommandID
}

// A real poll-mode agent process reports its result to a real Thorax while
// Mandible refuses every store. The Thorax retries until its drain gives up
// and answers the agent UNAVAILABLE; the agent retries on its own, and once a
// Thorax serves its address again (restarted) and Mandible takes results, the
// retried report is forwarded and stored. The command ran once.
func TestAgentRetriesItsResultUntilARestartedThoraxStoresIt(t *testing.T) {
	t.Parallel()
	r := setupResultRig(t)
	port, err := devstack.FreePort(false)
	require.NoError(t, err)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	first, stopFirst := r.startThoraxAt(t, "thorax-first", addr)

	c := &execCluster{ctx: r.ctx, dir: t.TempDir()}
	marker := filepath.Join(c.dir, "runs")
	agent := c.startProcess(t, "web-1", testenv.Binary(t, "agent"), fmt.Sprintf(`name = "web-1"
mode = "poll"
[log]
level = "info"
[thorax]
address = %q
insecure = true
[journal]
dir = %q
`, addr, filepath.Join(c.dir, "journal"))+agentExecConfig)

	r.failStores.Store(1 << 20)
	id := r.dispatchCommand(t, first.InstanceID(), "echo ran >> "+marker)
	require.Eventually(t, func() bool { return r.stores.Load() >= 2 }, brokerWait, 20*time.Millisecond,
		"the first Thorax never tried, then retried, to store the agent's result")
	stopFirst()
	require.Eventually(t, func() bool { return strings.Contains(agent.log(), "reporting result failed") }, brokerWait, 20*time.Millisecond,
		"the agent never heard that its report failed")
	st, _, _ := r.stored(t, id)
	require.Equal(t, "running", st, "nothing was stored yet")

	r.failStores.Store(0)
	second, _ := r.startThoraxAt(t, "thorax-second", addr)
	require.Eventually(t, func() bool {
		st, _, _ := r.stored(t, id)
		return st == "succeeded"
	}, brokerWait, 50*time.Millisecond, "the agent's retried report was never stored")
	_, holder, deliveredBy := r.stored(t, id)
	require.Equal(t, first.InstanceID(), holder.String())
	require.Equal(t, second.InstanceID(), deliveredBy.String(), "the restarted Thorax forwarded the retried report")
	runs, err := os.ReadFile(marker)
	require.NoError(t, err)
	require.Equal(t, "ran\n", string(runs), "the command ran once")
	require.False(t, agent.exited(), "the agent kept running through the retries")
}
