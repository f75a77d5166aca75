package e2e_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/devcerts"
	"github.com/mantis-deploy/mantis/internal/identity"
	"github.com/mantis-deploy/mantis/internal/testrig/devstack"
	"github.com/mantis-deploy/mantis/internal/testrig/testenv"
	"github.com/mantis-deploy/mantis/schema"
)

// Timing of the execution-tier processes the tests start. Thorax polls and heartbeats
// often so that a test waits on the behaviour under test, not on a tick.
const (
	thoraxPollInterval      = "200ms"
	thoraxHeartbeatInterval = "500ms"
	// startTimeout bounds start-up waits: building, registering, a first poll.
	startTimeout = 90 * time.Second
)

// execCluster is what a test's Mantis processes share: a database of its own, the
// Temporal dev server, one development PKI, and a Mandible replica serving gRPC with
// mutual TLS.
type execCluster struct {
	ctx      context.Context
	dir      string
	pool     *pgxpool.Pool
	certs    devcerts.Bundle
	mandible *secureReplica
	// heartbeatTimeout is Mandible's [thorax] heartbeat_timeout.
	heartbeatTimeout time.Duration
	// mandibleOptions started the replica, for a test that starts it again.
	mandibleOptions replicaOptions
	// extraConfig is TOML appended to the file of each process, by binary name
	// ("thorax", "agent").
	extraConfig map[string]string
	// extraEnv is environment added to each process's, by binary name.
	extraEnv map[string][]string
	// thoraxDrainTimeout is each Thorax's [drain] timeout; empty means 5 s.
	thoraxDrainTimeout string
}

// secureReplica is a Mandible process whose gRPC port Thorax reaches over mTLS.
type secureReplica struct {
	*replica
	GRPCAddr string
}

// setupExecCluster starts Mandible on a fresh database with the given
// [thorax] heartbeat_timeout.
func setupExecCluster(t *testing.T, heartbeatTimeout time.Duration) *execCluster {
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
		ID: uniqueName("exec"), DatabaseURL: url, Temporal: testenv.TemporalServer(t), PollInterval: "2s",
	}
	c.mandible = startSecureReplica(t, c.mandibleOptions, certs, heartbeatTimeout)
	return c
}

// startSecureReplica is startReplica with gRPC on mutual TLS (the "mandible" pair of
// certs, client certificates checked against its CA) and the given heartbeat timeout,
// set through the environment overrides that beat the replica's file.
func startSecureReplica(t *testing.T, o replicaOptions, certs devcerts.Bundle, heartbeatTimeout time.Duration) *secureReplica {
	t.Helper()
	port, err := devstack.FreePort(false)
	require.NoError(t, err)
	return startSecureReplicaAt(t, o, certs, heartbeatTimeout, fmt.Sprintf("127.0.0.1:%d", port))
}

// startSecureReplicaAt is startSecureReplica serving gRPC on addr, so that a
// restarted replica is found where its Thorax instances look for it.
func startSecureReplicaAt(t *testing.T, o replicaOptions, certs devcerts.Bundle, heartbeatTimeout time.Duration, addr string) *secureReplica {
	t.Helper()
	cert, key := certs.Pair("mandible")
	o.Env = append(o.Env,
		"MANTIS_GRPC_LISTEN="+addr,
		"MANTIS_GRPC_INSECURE=false",
		"MANTIS_GRPC_CA_CERT_PATH="+certs.CACert(),
		"MANTIS_GRPC_CERT_PATH="+cert,
		"MANTIS_GRPC_KEY_PATH="+key,
		"MANTIS_THORAX_HEARTBEAT_TIMEOUT="+heartbeatTimeout.String(),
	)
	return &secureReplica{replica: startReplica(t, o), GRPCAddr: addr}
}

// issue returns a certificate pair of the cluster's CA for role and name: each
// Thorax presents its own name, each agent its target's.
func (c *execCluster) issue(t *testing.T, role identity.Role, name string) (cert, key string) {
	t.Helper()
	cert, key, err := c.certs.Issue(role, name, []string{"localhost", "127.0.0.1"})
	require.NoError(t, err)
	return cert, key
}

// mantisProcess is a Thorax or agent the test runs as an OS process, in a process
// group of its own, killed if the test binary dies.
type mantisProcess struct {
	Name    string
	cmd     *exec.Cmd
	done    chan struct{}
	logPath string
}

// startProcess runs binary --config with config written to the test's directory. The
// child sees no MANTIS_ variable of the test's environment: its file decides.
func (c *execCluster) startProcess(t *testing.T, name, binary, config string) *mantisProcess {
	t.Helper()
	config += c.extraConfig[filepath.Base(binary)]
	confPath := filepath.Join(c.dir, name+".toml")
	require.NoError(t, os.WriteFile(confPath, []byte(config), 0o600))
	cmd := exec.Command(binary, "--config", confPath)
	cmd.Env = append(environWithoutMantis(), c.extraEnv[filepath.Base(binary)]...)
	cmd.Dir = c.dir
	return c.runProcess(t, name, cmd)
}

// runProcess starts cmd as the process name, its output in the test's directory,
// stopped (and its log shown on failure) when the test ends.
func (c *execCluster) runProcess(t *testing.T, name string, cmd *exec.Cmd) *mantisProcess {
	t.Helper()
	logPath := filepath.Join(c.dir, name+".log")
	logFile, err := os.Create(logPath)
	require.NoError(t, err)
	p := &mantisProcess{Name: name, done: make(chan struct{}), logPath: logPath, cmd: cmd}
	p.cmd.Stdout, p.cmd.Stderr = logFile, logFile
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	require.NoError(t, p.cmd.Start())
	go func() {
		_ = p.cmd.Wait()
		logFile.Close()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.stop(t)
		if t.Failed() {
			t.Logf("%s log:\n%s", name, tailString(p.log(), 4000))
		}
	})
	return p
}

func environWithoutMantis() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "MANTIS_") {
			env = append(env, kv)
		}
	}
	return env
}

// Pid is the process id.
func (p *mantisProcess) Pid() int { return p.cmd.Process.Pid }

func (p *mantisProcess) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// kill ends the process at once, as a crash would.
func (p *mantisProcess) kill(t *testing.T) {
	t.Helper()
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// stop asks the process to shut down, waits a bounded time, then kills what is left
// of its process group.
func (p *mantisProcess) stop(t *testing.T) {
	if !p.exited() {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(30 * time.Second):
			t.Errorf("%s did not stop within 30s of SIGTERM", p.Name)
		}
	}
	_ = syscall.Kill(-p.Pid(), syscall.SIGKILL)
	<-p.done
}

func (p *mantisProcess) log() string {
	b, _ := os.ReadFile(p.logPath)
	return string(b)
}

// thoraxProcess is a Thorax instance and the address its agents server listens on.
type thoraxProcess struct {
	*mantisProcess
	AgentsAddr string
}

// startThorax starts a Thorax instance calling the cluster's Mandible; it claims on
// its polling tick alone (no broker).
func (c *execCluster) startThorax(t *testing.T) *thoraxProcess {
	t.Helper()
	port, err := devstack.FreePort(false)
	require.NoError(t, err)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	name := uniqueName("thorax")
	cert, key := c.issue(t, identity.RoleThorax, name)
	conf := fmt.Sprintf(`name = %q
[log]
level = "info"
[mandible]
address = %q
ca_cert_path = %q
cert_path = %q
key_path = %q
[polling]
interval = %q
fallback_interval = %q
[heartbeat]
interval = %q
[agents]
listen = %q
ca_cert_path = %q
cert_path = %q
key_path = %q
[drain]
timeout = %q
`, name, c.mandible.GRPCAddr, c.certs.CACert(), cert, key,
		thoraxPollInterval, thoraxPollInterval, thoraxHeartbeatInterval,
		addr, c.certs.CACert(), cert, key, cmp.Or(c.thoraxDrainTimeout, "5s"))
	return &thoraxProcess{mantisProcess: c.startProcess(t, name, testenv.Binary(t, "thorax"), conf), AgentsAddr: addr}
}

// waitRegistered waits until Mandible has issued th an instance id and returns it.
func (c *execCluster) waitRegistered(t *testing.T, th *thoraxProcess) uuid.UUID {
	t.Helper()
	var id uuid.UUID
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		require.False(ct, th.exited(), "%s exited", th.Name)
		require.NoError(ct, c.pool.QueryRow(c.ctx,
			`SELECT id FROM thorax_instances WHERE name = $1 AND status = 'live'`, th.Name).Scan(&id))
	}, startTimeout, 100*time.Millisecond, "%s never registered with mandible", th.Name)
	return id
}

// agentExecConfig is the [exec] section of the test agents: a short kill grace so a
// timed-out command's group is gone soon after its timeout.
const agentExecConfig = `[exec]
kill_grace = "1s"
stop_timeout = "2s"
`

// startPollAgent starts a poll-mode agent polling th, and returns it; its name is
// the target's.
func (c *execCluster) startPollAgent(t *testing.T, th *thoraxProcess) *mantisProcess {
	t.Helper()
	return c.startPollAgentAt(t, th.AgentsAddr)
}

// startPollAgentAt starts a poll-mode agent that reaches its Thorax at address (Thorax's
// agents port, or a proxy in front of it).
func (c *execCluster) startPollAgentAt(t *testing.T, address string) *mantisProcess {
	t.Helper()
	name := uniqueName("poll")
	cert, key := c.issue(t, identity.RoleAgent, name)
	conf := fmt.Sprintf(`name = %q
mode = "poll"
[thorax]
address = %q
ca_cert_path = %q
cert_path = %q
key_path = %q
[journal]
dir = %q
`, name, address, c.certs.CACert(), cert, key, filepath.Join(c.dir, name, "journal")) + agentExecConfig
	return c.startProcess(t, name, testenv.Binary(t, "agent"), conf)
}

// listenAgentProcess is a listen-mode agent and the address it serves Thorax on.
type listenAgentProcess struct {
	*mantisProcess
	Addr string
}

// startListenAgent starts a listen-mode agent, presenting a certificate named for
// its target, that accepts only certificates of the thorax role from the
// cluster's CA.
func (c *execCluster) startListenAgent(t *testing.T) *listenAgentProcess {
	t.Helper()
	port, err := devstack.FreePort(false)
	require.NoError(t, err)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	name := uniqueName("listen")
	cert, key := c.issue(t, identity.RoleAgent, name)
	conf := fmt.Sprintf(`name = %q
mode = "listen"
[listen]
address = %q
ca_cert_path = %q
cert_path = %q
key_path = %q
[journal]
dir = %q
`, name, addr, c.certs.CACert(), cert, key, filepath.Join(c.dir, name, "journal")) + agentExecConfig
	a := &listenAgentProcess{mantisProcess: c.startProcess(t, name, testenv.Binary(t, "agent"), conf), Addr: addr}
	require.Eventually(t, func() bool { return strings.Contains(a.log(), "serving agent service") || a.exited() },
		startTimeout, 50*time.Millisecond, "listen agent %s never served", name)
	require.False(t, a.exited(), "listen agent %s exited:\n%s", name, a.log())
	return a
}

// registerListenTarget registers the agent's target through the schema, as the HTTP
// API does; Mandible pins it to the live instance with the fewest targets.
func (c *execCluster) registerListenTarget(t *testing.T, a *listenAgentProcess) schema.Target {
	t.Helper()
	target, err := schema.RegisterTarget(c.ctx, c.pool, schema.NewTarget{Name: a.Name, Mode: schema.ModeListen, Address: a.Addr}, c.heartbeatTimeout)
	require.NoError(t, err)
	return target
}

// waitPollTarget waits until Thorax's heartbeat has registered the poll agent's target
// and assigned it to instance.
func (c *execCluster) waitPollTarget(t *testing.T, agent *mantisProcess, instance uuid.UUID) {
	t.Helper()
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		require.False(ct, agent.exited(), "%s exited", agent.Name)
		var assigned *uuid.UUID
		require.NoError(ct, c.pool.QueryRow(c.ctx,
			`SELECT assigned_instance_id FROM targets WHERE name = $1 AND mode = 'poll'`, agent.Name).Scan(&assigned))
		require.NotNil(ct, assigned)
		require.Equal(ct, instance, *assigned)
	}, startTimeout, 100*time.Millisecond, "poll target %s never registered through thorax's heartbeat", agent.Name)
}

// enqueue writes one dispatch request and returns its id.
func (c *execCluster) enqueue(t *testing.T, r schema.NewDispatchRequest) uuid.UUID {
	t.Helper()
	if r.IdempotencyKey == "" {
		r.IdempotencyKey = uniqueName("req")
	}
	if r.Priority == "" {
		r.Priority = "normal"
	}
	out, err := schema.EnqueueDispatchRequests(c.ctx, c.pool, []schema.NewDispatchRequest{r})
	require.NoError(t, err)
	return out[0].ID
}

// storedCommand is a command_queue row as far as the tests read it.
type storedCommand struct {
	ID       uuid.UUID
	Status   string
	Holder   *uuid.UUID
	ExitCode *int
	Output   *string
	Error    *string
}

// command returns the command written for a dispatch request; ok is false while
// there is none yet.
func (c *execCluster) command(request uuid.UUID) (storedCommand, bool, error) {
	var s storedCommand
	err := c.pool.QueryRow(c.ctx, `
		SELECT id, status, holder_instance_id, exit_code, output, error FROM command_queue
		WHERE dispatch_request_id = $1 ORDER BY dispatch_attempt DESC LIMIT 1`, request).
		Scan(&s.ID, &s.Status, &s.Holder, &s.ExitCode, &s.Output, &s.Error)
	if err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return s, false, nil
		}
		return s, false, err
	}
	return s, true, nil
}

// waitCommand waits until the request's command reaches one of statuses.
func (c *execCluster) waitCommand(t *testing.T, request uuid.UUID, timeout time.Duration, statuses ...string) storedCommand {
	t.Helper()
	var s storedCommand
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		var ok bool
		var err error
		s, ok, err = c.command(request)
		require.NoError(ct, err)
		require.True(ct, ok, "no command written yet")
		require.Contains(ct, statuses, s.Status)
	}, timeout, 50*time.Millisecond, "the command of request %s never reached %v", request, statuses)
	return s
}

// execSetup is a cluster with one Thorax, a poll-mode and a listen-mode agent, both
// targets assigned to that Thorax.
type execSetup struct {
	*execCluster
	thorax   *thoraxProcess
	instance uuid.UUID
	poll     *mantisProcess
	listen   *listenAgentProcess
}

func setupExec(t *testing.T) execSetup {
	t.Helper()
	c := setupExecCluster(t, 10*time.Second)
	s := execSetup{execCluster: c, thorax: c.startThorax(t)}
	s.poll = c.startPollAgent(t, s.thorax)
	s.listen = c.startListenAgent(t)
	s.instance = c.waitRegistered(t, s.thorax)
	target := c.registerListenTarget(t, s.listen)
	require.NotNil(t, target.AssignedInstanceID, "a listen target registered while a Thorax lives is pinned to it")
	require.Equal(t, s.instance, *target.AssignedInstanceID)
	c.waitPollTarget(t, s.poll, s.instance)
	return s
}
