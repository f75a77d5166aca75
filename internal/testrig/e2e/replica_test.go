// Package e2e_test runs Mantis's processes as real OS processes against real
// PostgreSQL and Temporal.
package e2e_test

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/config"
	"github.com/mantis-deploy/mantis/internal/testrig/devstack"
	"github.com/mantis-deploy/mantis/internal/testrig/testenv"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

// replicaOptions are the knobs a test turns on a Mandible replica.
type replicaOptions struct {
	ID                string
	DatabaseURL       string
	Temporal          testenv.Temporal
	PollInterval      string
	ProcessingTimeout string
	DeliveryTimeout   string
	BatchSize         int
	Env               []string
	Args              []string
	// Broker enables [queue] against this broker vhost.
	Broker *testenv.Broker
	// HTTPPort, when set, is the port of the HTTP API (a restarted replica keeps its
	// own); otherwise a free one is taken.
	HTTPPort int
}

// replica is a Mandible process.
type replica struct {
	ID       string
	HTTPAddr string
	cmd      *exec.Cmd
	done     chan struct{}
	logPath  string
}

func uniqueName(prefix string) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return prefix + "-" + hex.EncodeToString(b[:])
}

func startReplica(t *testing.T, o replicaOptions) *replica {
	t.Helper()
	// A free port can be taken by another test's process between its choice and the
	// replica's bind: such a start is tried again on fresh ports.
	for try := 1; ; try++ {
		r := launchReplica(t, o)
		healthy := false
		require.Eventually(t, func() bool {
			select {
			case <-r.done:
				return true
			default:
			}
			resp, err := http.Get("http://" + r.HTTPAddr + "/healthz")
			if err != nil {
				return false
			}
			resp.Body.Close()
			healthy = resp.StatusCode == http.StatusOK
			return healthy
		}, 60*time.Second, 100*time.Millisecond, "replica %s never became healthy", o.ID)
		if healthy {
			return r
		}
		if try == 3 || !strings.Contains(r.log(), "address already in use") {
			t.Fatalf("replica %s exited during start-up:\n%s", o.ID, r.log())
		}
		t.Logf("replica %s lost a port to another process; starting it again", o.ID)
	}
}

// launchReplica starts a Mandible process without waiting for it.
func launchReplica(t *testing.T, o replicaOptions) *replica {
	t.Helper()
	bin := testenv.Binary(t, "mandible")
	httpPort := o.HTTPPort
	if httpPort == 0 {
		p, err := devstack.FreePort(false)
		require.NoError(t, err)
		httpPort = p
	}
	grpcPort, err := devstack.FreePort(false)
	require.NoError(t, err)
	if o.PollInterval == "" {
		o.PollInterval = "30s"
	}
	if o.ProcessingTimeout == "" {
		o.ProcessingTimeout = "300s"
	}
	if o.DeliveryTimeout == "" {
		o.DeliveryTimeout = "1h"
	}
	if o.BatchSize == 0 {
		o.BatchSize = config.DefaultMandible().Dispatch.BatchSize
	}
	dir := t.TempDir()
	conf := fmt.Sprintf(`replica_id = %q
[log]
level = "warn"
[database]
url = %q
max_conns = 8
[temporal]
address = %q
namespace = %q
deployment_task_queue = "deployments-%s"
[http]
listen = "127.0.0.1:%d"
tokens = [%q]
[grpc]
listen = "127.0.0.1:%d"
insecure = true
[dispatch]
poll_interval = %q
processing_timeout = %q
delivery_timeout = %q
batch_size = %d
[thorax]
heartbeat_timeout = "1h"
`, o.ID, o.DatabaseURL, o.Temporal.Address, o.Temporal.Namespace, o.ID, httpPort, apiToken, grpcPort,
		o.PollInterval, o.ProcessingTimeout, o.DeliveryTimeout, o.BatchSize)
	if b := o.Broker; b != nil {
		conf += fmt.Sprintf(`[queue]
enabled = true
host = %q
port = %d
username = %q
password = %q
vhost = %q
ca_cert_path = %q
client_cert_path = %q
client_key_path = %q
`, b.Host, b.Port, b.User, b.Password, b.VHost, b.CACert, b.ClientCert, b.ClientKey)
	}
	confPath := filepath.Join(dir, "mandible.toml")
	require.NoError(t, os.WriteFile(confPath, []byte(conf), 0o600))
	logPath := filepath.Join(dir, "mandible.log")
	logFile, err := os.Create(logPath)
	require.NoError(t, err)

	r := &replica{ID: o.ID, HTTPAddr: fmt.Sprintf("127.0.0.1:%d", httpPort), done: make(chan struct{}), logPath: logPath}
	r.cmd = exec.Command(bin, append([]string{"--config", confPath}, o.Args...)...)
	r.cmd.Env = append(os.Environ(), o.Env...)
	r.cmd.Stdout, r.cmd.Stderr = logFile, logFile
	r.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	require.NoError(t, r.cmd.Start())
	go func() {
		_ = r.cmd.Wait()
		logFile.Close()
		close(r.done)
	}()
	t.Cleanup(func() {
		r.stop(t)
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("replica %s log:\n%s", o.ID, tailString(string(b), 4000))
		}
	})
	return r
}

// exitCode waits up to timeout for the replica to exit and returns its status.
func (r *replica) exitCode(t *testing.T, timeout time.Duration) int {
	t.Helper()
	select {
	case <-r.done:
		return r.cmd.ProcessState.ExitCode()
	case <-time.After(timeout):
		t.Fatalf("replica %s still running after %s", r.ID, timeout)
		return 0
	}
}

// kill ends the replica at once, as a crash would.
func (r *replica) kill(t *testing.T) {
	t.Helper()
	_ = r.cmd.Process.Signal(syscall.SIGKILL)
	<-r.done
}

// stop asks the replica to shut down and waits a bounded time.
func (r *replica) stop(t *testing.T) {
	select {
	case <-r.done:
		return
	default:
	}
	_ = r.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-r.done:
	case <-time.After(30 * time.Second):
		_ = r.cmd.Process.Signal(syscall.SIGKILL)
		<-r.done
		t.Errorf("replica %s did not stop within 30s of SIGTERM", r.ID)
	}
}

func (r *replica) log() string {
	b, _ := os.ReadFile(r.logPath)
	return string(b)
}

// errorLines are the replica's log lines at level ERROR, the last 20 of them: what a
// 5xx answer's "see the server log" points at.
func (r *replica) errorLines() string {
	var lines []string
	for _, line := range strings.Split(r.log(), "\n") {
		if strings.Contains(line, "level=ERROR") {
			lines = append(lines, line)
		}
	}
	return strings.Join(lines[max(0, len(lines)-20):], "\n")
}

func tailString(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "..." + s[len(s)-n:]
}
