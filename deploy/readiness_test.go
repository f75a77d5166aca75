package deploy_test

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/devcerts"
	"github.com/mantis-deploy/mantis/internal/identity"
	"github.com/mantis-deploy/mantis/internal/sdnotify"
	"github.com/mantis-deploy/mantis/internal/testrig/devstack"
	"github.com/mantis-deploy/mantis/internal/testrig/testenv"
)

// readinessTimeout bounds a process's start-up, servers and all, on a busy machine.
const readinessTimeout = 2 * time.Minute

// notifySocket is a unixgram socket standing in for systemd's: every datagram a
// process sends to it arrives on states.
type notifySocket struct {
	path   string
	states chan string
}

// listenNotify opens a notification socket in a directory of the test's own.
func listenNotify(t *testing.T) notifySocket {
	t.Helper()
	dir, err := os.MkdirTemp("", "notify-") // short: a socket path has 108 bytes
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	s := notifySocket{path: filepath.Join(dir, "notify.sock"), states: make(chan string, 16)}
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: s.path, Net: "unixgram"})
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := conn.Read(buf)
			if err != nil {
				close(s.states)
				return
			}
			s.states <- string(buf[:n])
		}
	}()
	return s
}

// unitProcess starts the binary a unit's ExecStart names, built from this checkout,
// with --config path and $NOTIFY_SOCKET set as systemd sets it for Type=notify.
func unitProcess(t *testing.T, unit, configPath string, notify notifySocket) (*exec.Cmd, chan error) {
	t.Helper()
	s := unitSettings(t, "systemd/"+unit+".service")
	require.Equal(t, []string{"notify"}, s["Type"], unit)
	exec0 := strings.Fields(s["ExecStart"][0])
	require.Equal(t, "--config", exec0[1], "%s: ExecStart passes --config", unit)
	bin := testenv.Binary(t, filepath.Base(exec0[0]))
	cmd := exec.Command(bin, "--config", configPath)
	cmd.Env = append(os.Environ(), sdnotify.SocketEnv+"="+notify.path)
	out, err := os.Create(filepath.Join(t.TempDir(), "output.log"))
	require.NoError(t, err)
	cmd.Stdout, cmd.Stderr = out, out
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait(); out.Close() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		if t.Failed() {
			b, _ := os.ReadFile(out.Name())
			t.Logf("%s output:\n%s", unit, b)
		}
	})
	return cmd, exited
}

// awaitState waits for the process to send want, failing if it exits first.
func awaitState(t *testing.T, notify notifySocket, exited chan error, want string) {
	t.Helper()
	deadline := time.After(readinessTimeout)
	for {
		select {
		case state := <-notify.states:
			if strings.Contains(state, want) {
				return
			}
		case err := <-exited:
			t.Fatalf("exited (%v) before sending %s", err, want)
		case <-deadline:
			t.Fatalf("no %s within %s", want, readinessTimeout)
		}
	}
}

// stopLikeSystemd sends SIGTERM, as systemctl stop does, and waits for STOPPING=1 and a
// clean exit.
func stopLikeSystemd(t *testing.T, cmd *exec.Cmd, notify notifySocket, exited chan error) {
	t.Helper()
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	awaitState(t, notify, make(chan error), sdnotify.StateStopping)
	select {
	case err := <-exited:
		require.NoError(t, err, "a clean exit after SIGTERM")
	case <-time.After(readinessTimeout):
		t.Fatal("still running after SIGTERM")
	}
}

// TestMandibleUnitReportsReadyWhenServing runs Mandible as mantis-mandible.service
// does (Type=notify) against real PostgreSQL and Temporal: READY=1 arrives, and when it
// does the HTTP API already answers; SIGTERM brings STOPPING=1 and a clean exit.
func TestMandibleUnitReportsReadyWhenServing(t *testing.T) {
	t.Parallel()
	certs, err := devcerts.Generate(t.TempDir(), []string{"localhost", "127.0.0.1"})
	require.NoError(t, err)
	httpPort, err := devstack.FreePort(false)
	require.NoError(t, err)
	grpcPort, err := devstack.FreePort(false)
	require.NoError(t, err)
	temporal := testenv.TemporalServer(t)
	cert, key := certs.Pair("mandible")
	cfg := filepath.Join(t.TempDir(), "mandible.toml")
	require.NoError(t, os.WriteFile(cfg, []byte(fmt.Sprintf(`
replica_id = "readiness-test"

[database]
url = %q
max_conns = 4

[temporal]
address = %q
namespace = %q

[http]
listen = "127.0.0.1:%d"
tokens = ["readiness-test-token-0123456789abcdef"]

[grpc]
listen = "127.0.0.1:%d"
ca_cert_path = %q
cert_path = %q
key_path = %q
`, testenv.DatabaseURL(t), temporal.Address, temporal.Namespace, httpPort, grpcPort,
		certs.CACert(), cert, key)), 0o600))

	notify := listenNotify(t)
	cmd, exited := unitProcess(t, "mantis-mandible", cfg, notify)
	awaitState(t, notify, exited, sdnotify.StateReady)
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/healthz", httpPort))
	require.NoError(t, err, "the HTTP API answers once READY=1 is sent")
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	stopLikeSystemd(t, cmd, notify, exited)
}

// TestAgentUnitReportsReadyWhenListening runs a listen-mode agent as
// mantis-agent.service does: READY=1 arrives when it accepts TLS connections.
func TestAgentUnitReportsReadyWhenListening(t *testing.T) {
	t.Parallel()
	certs, err := devcerts.Generate(t.TempDir(), []string{"localhost", "127.0.0.1"})
	require.NoError(t, err)
	port, err := devstack.FreePort(false)
	require.NoError(t, err)
	// A listen agent serves a pair naming its own target, as Thorax requires.
	cert, key, err := certs.Issue(identity.RoleAgent, "readiness-1", []string{"localhost", "127.0.0.1"})
	require.NoError(t, err)
	cfg := filepath.Join(t.TempDir(), "agent.toml")
	require.NoError(t, os.WriteFile(cfg, []byte(fmt.Sprintf(`
name = "readiness-1"
mode = "listen"

[listen]
address = "127.0.0.1:%d"
ca_cert_path = %q
cert_path = %q
key_path = %q

[journal]
dir = %q
`, port, certs.CACert(), cert, key, t.TempDir())), 0o600))

	notify := listenNotify(t)
	cmd, exited := unitProcess(t, "mantis-agent", cfg, notify)
	awaitState(t, notify, exited, sdnotify.StateReady)
	caPEM, err := os.ReadFile(certs.CACert())
	require.NoError(t, err)
	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(caPEM))
	conn, err := tls.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port), &tls.Config{RootCAs: pool, ServerName: "127.0.0.1", NextProtos: []string{"h2"}})
	require.NoError(t, err, "the agent accepts connections once READY=1 is sent")
	conn.Close()
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	select {
	case err := <-exited:
		require.NoError(t, err, "a clean exit after SIGTERM")
	case <-time.After(readinessTimeout):
		t.Fatal("still running after SIGTERM")
	}
}
