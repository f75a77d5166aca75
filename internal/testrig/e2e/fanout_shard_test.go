package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/config"
	"github.com/mantis-deploy/mantis/internal/identity"
)

// A fleet larger than one process's open-file limit allows (each agent holds a TLS
// connection, and a pipe while its command runs; the limit here is 20,000 and cannot be
// raised) runs in shard processes: this test binary run again as
// TestFanOutAgentShard, with the shard's agents named in a file. Each shard is still one
// process sharing its Go runtime among its agents; separate hosts would each have their
// own.

const (
	// fanOutAgentsPerProcess is the most agents one process runs.
	fanOutAgentsPerProcess = 4000
	// fanOutShardVar names the file of a shard's agents in a shard process.
	fanOutShardVar = "MANTIS_FANOUT_SHARD"
)

// fanOutShard is the file a shard process reads: the Thorax its agents poll and the
// agents.
type fanOutShard struct {
	ThoraxAddr string        `json:"thorax_addr"`
	CACert     string        `json:"ca_cert"`
	Agents     []fanOutAgent `json:"agents"`
}

// startShards issues each agent its certificate, then runs the fleet in shard
// processes of at most fanOutAgentsPerProcess agents, stopped (SIGTERM) when the test
// ends. Their pids join r.shardPids, whose CPU counts as the agents' (they are this
// process's children) and whose RSS is added to this process's.
func (r *fanOutRig) startShards(t *testing.T, names []string, journals string) {
	t.Helper()
	for i := 0; i < len(names); i += fanOutAgentsPerProcess {
		shard := fanOutShard{ThoraxAddr: r.thorax.AgentsAddr, CACert: r.certs.CACert()}
		for _, name := range names[i:min(i+fanOutAgentsPerProcess, len(names))] {
			cert, key := r.issue(t, identity.RoleAgent, name)
			shard.Agents = append(shard.Agents, fanOutAgent{Name: name, Cert: cert, Key: key, Journal: filepath.Join(journals, name)})
		}
		r.startShard(t, i/fanOutAgentsPerProcess, shard)
	}
}

// startShard runs one shard process.
func (r *fanOutRig) startShard(t *testing.T, n int, shard fanOutShard) {
	t.Helper()
	raw, err := json.Marshal(shard)
	require.NoError(t, err)
	path := filepath.Join(r.dir, fmt.Sprintf("shard-%d.json", n))
	require.NoError(t, os.WriteFile(path, raw, 0o600))
	logPath := filepath.Join(r.dir, fmt.Sprintf("shard-%d.log", n))
	logFile, err := os.Create(logPath)
	require.NoError(t, err)
	cmd := exec.Command(os.Args[0], "-test.run=^TestFanOutAgentShard$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), fanOutShardVar+"="+path)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	require.NoError(t, cmd.Start(), "starting agent shard %d", n)
	r.shardPids = append(r.shardPids, cmd.Process.Pid)
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		defer logFile.Close()
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-exited:
			if err != nil {
				log, _ := os.ReadFile(logPath)
				t.Errorf("agent shard %d: %v\n%s", n, err, log)
			}
		case <-time.After(2 * fanOutAgentsStop):
			_ = cmd.Process.Kill()
			t.Errorf("agent shard %d did not stop within %s", n, 2*fanOutAgentsStop)
		}
	})
}

// TestFanOutAgentShard runs the agents of one shard of BenchmarkDeploymentFanOut's
// fleet until SIGTERM; outside a shard process it is skipped.
func TestFanOutAgentShard(t *testing.T) {
	path := os.Getenv(fanOutShardVar)
	if path == "" {
		t.Skip("runs only as a shard process of BenchmarkDeploymentFanOut's fleet")
	}
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	var shard fanOutShard
	require.NoError(t, json.Unmarshal(raw, &shard))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	cfgs := make([]config.Agent, len(shard.Agents))
	for i, a := range shard.Agents {
		cfgs[i] = a.config(shard.ThoraxAddr, shard.CACert)
		require.NoError(t, cfgs[i].Validate(), "configuration of agent %s", a.Name)
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	f := runAgents(cfgs, logger)
	<-ctx.Done()
	require.NoError(t, f.stop(), "agents of shard %s", path)
}
