package e2e_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/agent"
	"github.com/mantis-deploy/mantis/internal/config"
	"github.com/mantis-deploy/mantis/internal/devcerts"
	"github.com/mantis-deploy/mantis/internal/devstack"
	"github.com/mantis-deploy/mantis/internal/identity"
	"github.com/mantis-deploy/mantis/internal/testenv"
)

// The rig of the fan-out benchmark: one Mandible replica and one Thorax (real
// binaries) with the broker on, and a fleet of poll agents run in this process, each
// an agent.Run of its own configuration: its own target, certificate, TLS connection
// to Thorax and journal. Only the process is shared (the Go runtime and its
// scheduler), and the journals are on tmpfs, as each agent's disk would be its own.

const (
	// fanOutLabel is the label key that selects the benchmark's targets.
	fanOutLabel = "fanout"
	// fanOutAssignTimeout bounds the wait for every agent to poll Thorax and Thorax's
	// heartbeat to assign its target.
	fanOutAssignTimeout = 10 * time.Minute
	// fanOutAgentsStop bounds the wait for the in-process agents to stop.
	fanOutAgentsStop = time.Minute
	// fanOutJournalBase is where the agents' journals go when it exists: a tmpfs.
	fanOutJournalBase = "/dev/shm"
	// fanOutHeartbeatTimeout is Mandible's [thorax] heartbeat_timeout.
	fanOutHeartbeatTimeout = 30 * time.Second
)

// fanOutRig is the cluster of one fan-out case.
type fanOutRig struct {
	*execCluster
	thorax *thoraxProcess
	// thoraxMetrics is the address of Thorax's /metrics.
	thoraxMetrics string
	// label is the value of fanOutLabel on every target of the fleet.
	label   string
	targets int
}

// startFanOutRig starts Mandible and Thorax with the broker on, registers targets
// targets in one statement, starts their agents in this process and waits until
// Thorax's heartbeat has assigned every target to it.
func startFanOutRig(t *testing.T, targets int) *fanOutRig {
	t.Helper()
	ctx := context.Background()
	url := testenv.DatabaseURL(t)
	pool, err := pgxpool.New(ctx, url)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	dir := t.TempDir()
	certs, err := devcerts.Generate(filepath.Join(dir, "certs"), []string{"localhost", "127.0.0.1"})
	require.NoError(t, err)
	broker := testenv.RabbitMQ(t)
	c := &execCluster{ctx: ctx, dir: dir, pool: pool, certs: certs, heartbeatTimeout: fanOutHeartbeatTimeout}
	c.mandibleOptions = replicaOptions{
		ID: uniqueName("fanout"), DatabaseURL: url, Temporal: testenv.TemporalServer(t), PollInterval: "2s", Broker: &broker,
	}
	c.mandible = startSecureReplica(t, c.mandibleOptions, certs, fanOutHeartbeatTimeout)
	r := &fanOutRig{execCluster: c, label: uniqueName("fleet"), targets: targets}
	r.thorax = r.startThorax(t, broker)
	instance := c.waitRegistered(t, r.thorax)

	names := make([]string, targets)
	for i := range names {
		names[i] = fmt.Sprintf("%s-%05d", r.label, i)
	}
	_, err = pool.Exec(ctx, `INSERT INTO targets (name, mode, labels)
		SELECT n, 'poll', jsonb_build_object($2::text, $3::text) FROM unnest($1::text[]) AS n`,
		names, fanOutLabel, r.label)
	require.NoError(t, err, "registering %d targets", targets)
	r.startAgents(t, names)
	require.Eventually(t, func() bool {
		var n int
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM targets
			WHERE labels->>$1 = $2 AND assigned_instance_id = $3`, fanOutLabel, r.label, instance).Scan(&n))
		return n == targets
	}, fanOutAssignTimeout, 500*time.Millisecond, "not every agent polled thorax and got its target assigned")
	return r
}

// startThorax starts Thorax with the broker on and room for the whole fleet: it may
// hold a command of every target at once (polling.max_held_commands), and
// agents.max_concurrent_calls is raised to the fleet's size too (it bounds listen-mode
// calls only; this fleet polls).
func (r *fanOutRig) startThorax(t *testing.T, b testenv.Broker) *thoraxProcess {
	t.Helper()
	port, err := devstack.FreePort(false)
	require.NoError(t, err)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	metricsPort, err := devstack.FreePort(false)
	require.NoError(t, err)
	r.thoraxMetrics = fmt.Sprintf("127.0.0.1:%d", metricsPort)
	name := uniqueName("thorax")
	cert, key := r.issue(t, identity.RoleThorax, name)
	conf := fmt.Sprintf(`name = %q
[log]
level = "info"
[mandible]
address = %q
ca_cert_path = %q
cert_path = %q
key_path = %q
[queue]
enabled = true
host = %q
port = %d
username = %q
password = %q
vhost = %q
ca_cert_path = %q
client_cert_path = %q
client_key_path = %q
[polling]
interval = "1s"
fallback_interval = %q
max_held_commands = %d
[heartbeat]
interval = "1s"
[agents]
listen = %q
ca_cert_path = %q
cert_path = %q
key_path = %q
max_concurrent_calls = %d
[drain]
timeout = "5s"
[metrics]
listen = %q
`, name, r.mandible.GRPCAddr, r.certs.CACert(), cert, key,
		b.Host, b.Port, b.User, b.Password, b.VHost, b.CACert, b.ClientCert, b.ClientKey,
		thoraxPollInterval, r.targets, addr, r.certs.CACert(), cert, key, r.targets, r.thoraxMetrics)
	return &thoraxProcess{mantisProcess: r.startProcess(t, name, testenv.Binary(t, "thorax"), conf), AgentsAddr: addr}
}

// startAgents runs a poll agent for each name in this process until the test ends.
// Each has its own certificate (agent/<name>), so Thorax's check that a poll names
// the caller's own target holds for every one of them.
func (r *fanOutRig) startAgents(t *testing.T, names []string) {
	t.Helper()
	base := fanOutJournalBase
	if _, err := os.Stat(base); err != nil {
		base = ""
	}
	journals, err := os.MkdirTemp(base, "mantis-fanout-")
	require.NoError(t, err)
	logFile, err := os.Create(filepath.Join(r.dir, "agents.log"))
	require.NoError(t, err)
	logger := slog.New(slog.NewTextHandler(logFile, &slog.HandlerOptions{Level: slog.LevelWarn}))
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		fails   []error
		cancels []context.CancelFunc
	)
	t.Cleanup(func() {
		for _, cancel := range cancels {
			cancel()
		}
		stopped := make(chan struct{})
		go func() { wg.Wait(); close(stopped) }()
		select {
		case <-stopped:
		case <-time.After(fanOutAgentsStop):
			t.Errorf("the in-process agents did not stop within %s", fanOutAgentsStop)
		}
		logFile.Close()
		_ = os.RemoveAll(journals)
		mu.Lock()
		defer mu.Unlock()
		require.NoError(t, errors.Join(fails...), "in-process agents")
	})
	for _, name := range names {
		cfg := r.agentConfig(t, name, filepath.Join(journals, name))
		// A context of its own, as in its own process: every poll's deadline is a
		// child of it, and a parent shared by thousands of agents serializes them
		// on its lock.
		ctx, cancel := context.WithCancel(context.Background())
		cancels = append(cancels, cancel)
		wg.Go(func() {
			if err := agent.Run(ctx, cfg, logger, nil); err != nil {
				mu.Lock()
				fails = append(fails, fmt.Errorf("agent %s: %w", cfg.Name, err))
				mu.Unlock()
			}
		})
	}
}

// agentConfig is the configuration of the poll agent of target name: the defaults,
// with the short kill grace of the other test agents.
func (r *fanOutRig) agentConfig(t *testing.T, name, journal string) config.Agent {
	t.Helper()
	cert, key := r.issue(t, identity.RoleAgent, name)
	cfg := config.DefaultAgent()
	cfg.Name, cfg.Mode = name, config.ModePoll
	cfg.Thorax = config.Endpoint{Address: r.thorax.AgentsAddr,
		TLS: config.TLS{CACertPath: r.certs.CACert(), CertPath: cert, KeyPath: key}}
	cfg.Journal.Dir = journal
	cfg.Exec.KillGrace = config.Duration{Duration: time.Second}
	cfg.Exec.StopTimeout = config.Duration{Duration: 2 * time.Second}
	require.NoError(t, cfg.Validate(), "configuration of agent %s", name)
	return cfg
}
