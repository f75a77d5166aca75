package e2e_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/agent"
	"github.com/mantis-deploy/mantis/internal/config"
	"github.com/mantis-deploy/mantis/internal/devcerts"
	"github.com/mantis-deploy/mantis/internal/identity"
	"github.com/mantis-deploy/mantis/internal/testrig/devstack"
	"github.com/mantis-deploy/mantis/internal/testrig/testenv"
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
	// fileLimit is this process's open-file limit during the case, which Thorax
	// inherits.
	fileLimit uint64
	// shardPids are the agent shard processes of a fleet too large for this one.
	shardPids []int
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
	r := &fanOutRig{execCluster: c, label: uniqueName("fleet"), targets: targets, fileLimit: raiseFileLimit(t, targets)}
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

// filesPerAgent is what one in-process agent may hold open at the step's peak: its
// TLS connection to Thorax, and its command's output pipe and standard input while the
// shell starts; fileLimitSpare is room for the rest of the process.
const (
	filesPerAgent  = 4
	fileLimitSpare = 4096
)

// raiseFileLimit raises this process's open-file limit, soft and hard, to what a fleet
// of agents running their commands at once needs, where it is lower and the process
// may (as root), and puts it back when the test ends. It returns the limit in force:
// a fleet of 10,000 in one process needs more than the usual 20,000, which separate
// hosts would each have to themselves.
func raiseFileLimit(t *testing.T, agents int) uint64 {
	t.Helper()
	var was syscall.Rlimit
	require.NoError(t, syscall.Getrlimit(syscall.RLIMIT_NOFILE, &was))
	want := uint64(agents*filesPerAgent + fileLimitSpare)
	if was.Cur >= want {
		return was.Cur
	}
	raised := syscall.Rlimit{Cur: want, Max: max(want, was.Max)}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &raised); err != nil {
		t.Logf("open-file limit stays %d (wanted %d for %d agents): %v", was.Cur, want, agents, err)
		return was.Cur
	}
	t.Cleanup(func() { _ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &was) })
	return raised.Cur
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

// startAgents runs a poll agent for each name until the test ends: in this process, or,
// for a fleet larger than fanOutAgentsPerProcess, in shard processes of at most that
// many each (see startShards). Each agent has its own certificate (agent/<name>), so
// Thorax's check that a poll names the caller's own target holds for every one of them.
func (r *fanOutRig) startAgents(t *testing.T, names []string) {
	t.Helper()
	journals := fanOutJournals(t)
	if len(names) > fanOutAgentsPerProcess {
		r.startShards(t, names, journals)
		return
	}
	logFile, err := os.Create(filepath.Join(r.dir, "agents.log"))
	require.NoError(t, err)
	logger := slog.New(slog.NewTextHandler(logFile, &slog.HandlerOptions{Level: slog.LevelWarn}))
	cfgs := make([]config.Agent, len(names))
	for i, name := range names {
		cfgs[i] = r.agentConfig(t, name, filepath.Join(journals, name))
	}
	f := runAgents(cfgs, logger)
	t.Cleanup(func() {
		defer logFile.Close()
		require.NoError(t, f.stop(), "in-process agents")
	})
}

// fleet is poll agents running in this process, each an agent.Run of its own.
type fleet struct {
	wg      sync.WaitGroup
	mu      sync.Mutex
	fails   []error
	cancels []context.CancelFunc
}

// runAgents starts an agent of each configuration in this process.
func runAgents(cfgs []config.Agent, logger *slog.Logger) *fleet {
	f := &fleet{}
	for _, cfg := range cfgs {
		// A context of its own, as in its own process: every poll's deadline is a
		// child of it, and a parent shared by thousands of agents serializes them
		// on its lock.
		ctx, cancel := context.WithCancel(context.Background())
		f.cancels = append(f.cancels, cancel)
		f.wg.Go(func() {
			if err := agent.Run(ctx, cfg, logger, nil); err != nil {
				f.mu.Lock()
				f.fails = append(f.fails, fmt.Errorf("agent %s: %w", cfg.Name, err))
				f.mu.Unlock()
			}
		})
	}
	return f
}

// stop stops every agent and waits for them, at most fanOutAgentsStop, returning what
// any of them failed with.
func (f *fleet) stop() error {
	for _, cancel := range f.cancels {
		cancel()
	}
	stopped := make(chan struct{})
	go func() { f.wg.Wait(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(fanOutAgentsStop):
		return fmt.Errorf("the agents did not stop within %s", fanOutAgentsStop)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return errors.Join(f.fails...)
}

// fanOutJournals makes the directory the fleet's journals go in (on tmpfs where there
// is one) and removes it when the test ends.
func fanOutJournals(t *testing.T) string {
	t.Helper()
	base := fanOutJournalBase
	if _, err := os.Stat(base); err != nil {
		base = ""
	}
	journals, err := os.MkdirTemp(base, "mantis-fanout-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(journals) })
	return journals
}

// agentConfig is the configuration of the poll agent of target name, with a
// certificate of its own.
func (r *fanOutRig) agentConfig(t *testing.T, name, journal string) config.Agent {
	t.Helper()
	cert, key := r.issue(t, identity.RoleAgent, name)
	cfg := fanOutAgent{Name: name, Cert: cert, Key: key, Journal: journal}.config(r.thorax.AgentsAddr, r.certs.CACert())
	require.NoError(t, cfg.Validate(), "configuration of agent %s", name)
	return cfg
}

// fanOutAgent is what one agent of the fleet needs beyond what all share.
type fanOutAgent struct {
	Name, Cert, Key, Journal string
}

// config is the agent's configuration: the defaults, polling the Thorax at addr, with
// the short kill grace of the other test agents.
func (a fanOutAgent) config(addr, caCert string) config.Agent {
	cfg := config.DefaultAgent()
	cfg.Name, cfg.Mode = a.Name, config.ModePoll
	cfg.Thorax = config.Endpoint{Address: addr, TLS: config.TLS{CACertPath: caCert, CertPath: a.Cert, KeyPath: a.Key}}
	cfg.Journal.Dir = a.Journal
	cfg.Exec.KillGrace = config.Duration{Duration: time.Second}
	cfg.Exec.StopTimeout = config.Duration{Duration: 2 * time.Second}
	return cfg
}
