package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
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

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/mantis-deploy/mantis/internal/cli/clitest"
	"github.com/mantis-deploy/mantis/internal/devcerts"
	"github.com/mantis-deploy/mantis/internal/testrig/devstack"
	"github.com/mantis-deploy/mantis/internal/testrig/testenv"
	"github.com/mantis-deploy/mantis/internal/tlsconf"
	"github.com/mantis-deploy/mantis/schema"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

const apiToken = "0123456789abcdef-serve-token"

// execute executes the root command in process with args and returns what it printed.
func execute(t *testing.T, args ...string) (string, error) {
	return clitest.Execute(t, newRootCommand(), args...)
}

// isolateEnv removes the MANTIS_ variables and DATABASE_URL for the test.
func isolateEnv(t *testing.T) { clitest.IsolateEnv(t, "DATABASE_URL") }

func writeConfig(t *testing.T, content string) string {
	return clitest.WriteConfig(t, "mandible.toml", content)
}

func problemLines(t *testing.T, err error) []string { return clitest.ProblemLines(t, err) }

func TestHelpListsSubcommandsAndFlags(t *testing.T) {
	t.Parallel()
	out, err := execute(t, "--help")
	require.NoError(t, err)
	for _, want := range []string{"mandible", "migrate", "check-config", "--config", "MANTIS_<SECTION>_<KEY>"} {
		require.Contains(t, out, want)
	}

	out, err = execute(t, "check-config", "--help")
	require.NoError(t, err)
	require.Contains(t, out, "--config")
}

func TestCheckConfigListsEveryProblemByKey(t *testing.T) {
	isolateEnv(t)
	t.Setenv("MANTIS_DISPATCH_BATCH_SIZE", "lots")
	path := writeConfig(t, `
replica_id = "replica 1"
colour = "green"

[database]
url = "postgres://mantis@127.0.0.1:5432/mantis"

[http]
tokens = ["0123456789abcdef-token"]

[grpc]
insecure = true

[queue]
enabled = true
host = "localhost"
username = "mantis"
password = "broker-password-not-for-output"

[dispatch]
poll_interval = "-5s"

[tuning]
turbo = true
`)
	_, err := execute(t, "check-config", "--config", path)
	lines := problemLines(t, err)
	want := []string{
		"MANTIS_DISPATCH_BATCH_SIZE: ",
		"colour: unknown key",
		"dispatch.poll_interval: must be positive",
		"queue.ca_cert_path: required when queue.enabled = true",
		"replica_id: must match",
		"tuning: unknown key",
	}
	require.Len(t, lines, len(want), "one line per problem:\n%s", err)
	for i, prefix := range want {
		require.True(t, strings.HasPrefix(lines[i], prefix), "line %q should start with %q", lines[i], prefix)
	}
	require.NotContains(t, err.Error(), "broker-password-not-for-output")
}

func TestCheckConfigRejectsMalformedTOML(t *testing.T) {
	isolateEnv(t)
	path := writeConfig(t, "[database\nurl = 1\n")
	_, err := execute(t, "check-config", "--config", path)
	require.ErrorContains(t, err, path)
}

func TestCheckConfigAcceptsShippedConfigAndRedactsSecrets(t *testing.T) {
	isolateEnv(t)
	// The shipped file passes alone: no variable supplies a key it lacks.
	out, err := execute(t, "check-config", "--config", filepath.Join(testenv.RepoRoot(t), "deploy", "mandible.toml"))
	require.NoError(t, err)
	require.Contains(t, out, "[queue]")
	require.Contains(t, out, "[redacted]")
	require.NotContains(t, out, apiToken)
	require.NotContains(t, out, "the mantis broker user's password")
}

// child is a started process and the outcome of its Wait.
type child struct {
	cmd     *exec.Cmd
	exited  chan struct{}
	waitErr error
	logPath string
}

func (c *child) done() bool {
	select {
	case <-c.exited:
		return true
	default:
		return false
	}
}

func (c *child) log() string {
	b, _ := os.ReadFile(c.logPath)
	return string(b)
}

// start runs bin with args and an environment without MANTIS_ variables, killing it
// when the test ends if it is still running.
func start(t *testing.T, bin string, args ...string) *child {
	t.Helper()
	logPath := filepath.Join(t.TempDir(), "output.log")
	logFile, err := os.Create(logPath)
	require.NoError(t, err)
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "MANTIS_") && !strings.HasPrefix(kv, "DATABASE_URL=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	require.NoError(t, cmd.Start())
	c := &child{cmd: cmd, exited: make(chan struct{}), logPath: logPath}
	go func() {
		c.waitErr = cmd.Wait()
		logFile.Close()
		close(c.exited)
	}()
	t.Cleanup(func() {
		if !c.done() {
			_ = cmd.Process.Kill()
			<-c.exited
		}
		if t.Failed() {
			t.Logf("%s output:\n%s", filepath.Base(bin), c.log())
		}
	})
	return c
}

// eventually waits for cond, failing at once, with the child's output, if the child
// exits first.
func (c *child) eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	require.Eventually(t, func() bool { return c.done() || cond() }, 60*time.Second, 100*time.Millisecond, what)
	require.False(t, c.done(), "exited (%v) while waiting for %s", c.waitErr, what)
}

// serveSetup is a Mandible serving on free ports with a database of its own.
type serveSetup struct {
	mandible    *child
	databaseURL string
	httpURL     string
	grpcAddr    string
	certs       devcerts.Bundle
}

func setupServe(t *testing.T) serveSetup {
	t.Helper()
	bin := testenv.Binary(t, "mandible")
	certs, err := devcerts.Generate(t.TempDir(), []string{"localhost", "127.0.0.1"})
	require.NoError(t, err)
	httpPort, err := devstack.FreePort(false)
	require.NoError(t, err)
	grpcPort, err := devstack.FreePort(false)
	require.NoError(t, err)
	databaseURL := testenv.DatabaseURL(t)
	temporal := testenv.TemporalServer(t)
	serverCert, serverKey := certs.Pair("mandible")
	s := serveSetup{
		databaseURL: databaseURL,
		httpURL:     fmt.Sprintf("http://127.0.0.1:%d", httpPort),
		grpcAddr:    fmt.Sprintf("127.0.0.1:%d", grpcPort),
		certs:       certs,
	}
	config := writeConfig(t, fmt.Sprintf(`
replica_id = "serve-test"

[database]
url = %q
max_conns = 4

[temporal]
address = %q
namespace = %q

[http]
listen = "127.0.0.1:%d"
tokens = [%q]

[grpc]
listen = %q
ca_cert_path = %q
cert_path = %q
key_path = %q
`, databaseURL, temporal.Address, temporal.Namespace, httpPort, apiToken,
		s.grpcAddr, certs.CACert(), serverCert, serverKey))
	s.mandible = start(t, bin, "--config", config)
	return s
}

// get fetches url and returns the status code and body; zero on a transport error.
func get(url string) (int, []byte) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, nil
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil
	}
	defer resp.Body.Close()
	var body bytes.Buffer
	_, _ = body.ReadFrom(resp.Body)
	return resp.StatusCode, body.Bytes()
}

// healthCheck calls the gRPC health service over TLS configured by cfg.
func healthCheck(t *testing.T, addr string, cfg *tls.Config) (*healthpb.HealthCheckResponse, error) {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
	require.NoError(t, err)
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
}

// firstRead connects to addr over TLS as a gRPC client would (ALPN h2) and reads.
// Once Mandible accepts a client it speaks first (its HTTP/2 settings), so a nil
// result means the handshake was accepted and an error that it was refused. Under
// TLS 1.3 the client's half of the handshake completes before the server judges its
// certificate: the verdict arrives with the first read.
func firstRead(addr string, cfg *tls.Config) error {
	cfg = cfg.Clone()
	cfg.NextProtos = []string{"h2"}
	dialer := &tls.Dialer{NetDialer: &net.Dialer{Timeout: 5 * time.Second}, Config: cfg}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := dialer.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	if err := conn.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
		return err
	}
	_, err = conn.Read(make([]byte, 1))
	return err
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func TestServe(t *testing.T) {
	t.Parallel()
	s := setupServe(t)

	s.mandible.eventually(t, "/healthz answering 200", func() bool {
		code, _ := get(s.httpURL + "/healthz")
		return code == http.StatusOK
	})
	// The flat http.tokens list still works, as admin, and Mandible says it is deprecated.
	require.Contains(t, s.mandible.log(), "http.tokens is deprecated")

	var ready struct {
		Ready  bool              `json:"ready"`
		Checks map[string]string `json:"checks"`
	}
	s.mandible.eventually(t, "/readyz answering 200", func() bool {
		code, body := get(s.httpURL + "/readyz")
		return code == http.StatusOK && json.Unmarshal(body, &ready) == nil
	})
	require.True(t, ready.Ready)
	require.Equal(t, "ok", ready.Checks["database"], "checks: %v", ready.Checks)
	require.Equal(t, "ok", ready.Checks["temporal"], "checks: %v", ready.Checks)

	t.Run("schema migrated", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, s.databaseURL)
		require.NoError(t, err)
		defer conn.Close(ctx)
		rows, err := conn.Query(ctx, `SELECT version FROM schema_migrations ORDER BY version`)
		require.NoError(t, err)
		applied, err := pgx.CollectRows(rows, pgx.RowTo[int])
		require.NoError(t, err)
		all, err := schema.Migrations()
		require.NoError(t, err)
		require.NotEmpty(t, applied)
		require.Len(t, applied, len(all), "every migration is applied before serving")
	})

	clientTLS := func(t *testing.T, cert, key string) *tls.Config {
		t.Helper()
		cfg, err := tlsconf.Client(tlsconf.Files{CA: s.certs.CACert(), Cert: cert, Key: key}, "localhost")
		require.NoError(t, err)
		return cfg
	}

	t.Run("gRPC health over mutual TLS", func(t *testing.T) {
		cert, key := s.certs.Pair("thorax")
		cfg := clientTLS(t, cert, key)
		require.NoError(t, firstRead(s.grpcAddr, cfg))
		resp, err := healthCheck(t, s.grpcAddr, cfg)
		require.NoError(t, err)
		require.Equal(t, healthpb.HealthCheckResponse_SERVING, resp.GetStatus())
	})

	t.Run("gRPC refuses a client without a certificate", func(t *testing.T) {
		cfg := clientTLS(t, "", "")
		err := firstRead(s.grpcAddr, cfg)
		require.Error(t, err)
		require.False(t, isTimeout(err), "the server waited instead of refusing: %v", err)
		// The transport fails; an RPC-level refusal would be Unauthenticated.
		_, err = healthCheck(t, s.grpcAddr, cfg)
		require.Equal(t, codes.Unavailable, status.Code(err), "%v", err)
	})

	t.Run("gRPC refuses a certificate from another CA", func(t *testing.T) {
		other, err := devcerts.Generate(t.TempDir(), []string{"localhost"})
		require.NoError(t, err)
		cert, key := other.Pair("thorax")
		// The client trusts Mandible's CA, so only its own certificate is at fault.
		cfg := clientTLS(t, cert, key)
		err = firstRead(s.grpcAddr, cfg)
		require.Error(t, err)
		require.False(t, isTimeout(err), "the server waited instead of refusing: %v", err)
		_, err = healthCheck(t, s.grpcAddr, cfg)
		require.Equal(t, codes.Unavailable, status.Code(err), "%v", err)
	})

	t.Run("SIGTERM stops it with status 0", func(t *testing.T) {
		require.NoError(t, s.mandible.cmd.Process.Signal(syscall.SIGTERM))
		select {
		case <-s.mandible.exited:
		case <-time.After(shutdownGrace + 10*time.Second):
			t.Fatalf("still running %s after SIGTERM", shutdownGrace+10*time.Second)
		}
		var exitErr *exec.ExitError
		if errors.As(s.mandible.waitErr, &exitErr) {
			t.Fatalf("exit status %d after SIGTERM", exitErr.ExitCode())
		}
		require.NoError(t, s.mandible.waitErr)
		code, _ := get(s.httpURL + "/healthz")
		require.Zero(t, code, "HTTP is still served after exit")
	})
}
