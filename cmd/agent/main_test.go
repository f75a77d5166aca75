package main

import (
	"bytes"
	"context"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/cli/clitest"
	"github.com/mantis-deploy/mantis/internal/testrig/testenv"
)

// execute executes the root command in process with args and returns what it printed.
func execute(t *testing.T, args ...string) (string, error) {
	return clitest.Execute(t, newRootCommand(), args...)
}

// isolateEnv removes the MANTIS_ variables for the test and gives it a journal of its
// own (the agent journals its runs). Tests that call it cannot run in parallel.
func isolateEnv(t *testing.T) {
	clitest.IsolateEnv(t)
	t.Setenv("MANTIS_JOURNAL_DIR", filepath.Join(t.TempDir(), "journal"))
}

func writeConfig(t *testing.T, content string) string {
	return clitest.WriteConfig(t, "agent.toml", content)
}

func problemLines(t *testing.T, err error) []string { return clitest.ProblemLines(t, err) }

func TestHelpListsSubcommandsAndFlags(t *testing.T) {
	t.Parallel()
	out, err := execute(t, "--help")
	require.NoError(t, err)
	for _, want := range []string{"agent", "check-config", "--config", "poll mode", "listen mode", "MANTIS_<SECTION>_<KEY>"} {
		require.Contains(t, out, want)
	}
}

func TestCheckConfigListsEveryProblemByKey(t *testing.T) {
	isolateEnv(t)
	t.Setenv("MANTIS_EXEC_OUTPUT_LIMIT_BYTES", "64KiB")
	path := writeConfig(t, `
name = "web-1"
mode = "poll"
colour = "green"

[thorax]
address = "thorax.example.com:9190"
cert_path = "/etc/mantis/certs/agent.crt"
key_path = "/etc/mantis/certs/agent.key"

[exec]
max_concurrent = 0
default_timeout = "-10m"
`)
	_, err := execute(t, "check-config", "--config", path)
	lines := problemLines(t, err)
	want := []string{
		"MANTIS_EXEC_OUTPUT_LIMIT_BYTES: ",
		"colour: unknown key",
		"exec.default_timeout: must be positive",
		"exec.max_concurrent: must be positive",
		"thorax.ca_cert_path: required unless thorax.insecure = true",
	}
	require.Len(t, lines, len(want), "one line per problem:\n%s", err)
	for i, prefix := range want {
		require.True(t, strings.HasPrefix(lines[i], prefix), "line %q should start with %q", lines[i], prefix)
	}
}

func TestCheckConfigRejectsMalformedTOML(t *testing.T) {
	isolateEnv(t)
	path := writeConfig(t, "name = \"web-1\nmode = poll\n")
	_, err := execute(t, "check-config", "--config", path)
	require.ErrorContains(t, err, path)
}

func TestCheckConfigAcceptsShippedConfigs(t *testing.T) {
	isolateEnv(t)
	for _, mode := range []string{"poll", "listen"} {
		out, err := execute(t, "check-config", "--config", filepath.Join(testenv.RepoRoot(t), "deploy", "agent-"+mode+".toml"))
		require.NoError(t, err, mode)
		require.Contains(t, out, `mode = "`+mode+`"`)
	}
}

// lockedBuffer collects what the agent logs while the test reads it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// serve starts the root command with args in the background and returns its
// log and a function that stops it (as SIGTERM would) and returns its error.
func serve(t *testing.T, args ...string) (*lockedBuffer, func() error) {
	t.Helper()
	cmd := newRootCommand()
	out := &lockedBuffer{}
	cmd.SetOut(out)
	cmd.SetErr(out)
	cmd.SetArgs(args)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()
	stop := sync.OnceValue(func() error {
		cancel()
		select {
		case err := <-done:
			return err
		case <-time.After(30 * time.Second):
			require.FailNow(t, "the agent did not stop within 30s", out.String())
			return nil
		}
	})
	t.Cleanup(func() { _ = stop() })
	return out, stop
}

func TestServesInListenModeUntilStopped(t *testing.T) {
	isolateEnv(t)
	path := writeConfig(t, `
name = "web-1"
mode = "listen"

[listen]
address = "127.0.0.1:0"
insecure = true
`)
	out, stop := serve(t, "--config", path)
	require.Eventually(t, func() bool { return strings.Contains(out.String(), "serving agent service") },
		10*time.Second, 10*time.Millisecond, "log so far:\n%s", out)
	logs := out.String()
	require.Contains(t, logs, "serving thorax in plaintext")
	require.Contains(t, logs, "listen_address=127.0.0.1:")

	require.NoError(t, stop())
	require.Contains(t, out.String(), "agent stopped")
}

func TestPollModeKeepsTryingAnAbsentThorax(t *testing.T) {
	isolateEnv(t)
	// A port that was free a moment ago: nothing answers there.
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := lis.Addr().String()
	require.NoError(t, lis.Close())
	t.Setenv("MANTIS_THORAX_ADDRESS", addr)
	t.Setenv("MANTIS_THORAX_INSECURE", "true")

	out, stop := serve(t, "--config", writeConfig(t, "name = \"web-1\"\nmode = \"poll\"\n"))
	require.Eventually(t, func() bool { return strings.Count(out.String(), "polling thorax failed") >= 2 },
		20*time.Second, 10*time.Millisecond, "log so far:\n%s", out)
	require.Contains(t, out.String(), "calling thorax in plaintext")
	require.NoError(t, stop(), "an unreachable Thorax is no reason to exit")
}

func TestServeFailsOnUnreadableCertificates(t *testing.T) {
	isolateEnv(t)
	missing := filepath.Join(t.TempDir(), "missing-ca.crt")
	path := writeConfig(t, `
name = "web-1"
mode = "listen"

[listen]
address = "127.0.0.1:0"
ca_cert_path = "`+missing+`"
cert_path = "`+missing+`"
key_path = "`+missing+`"
`)
	_, err := execute(t, "--config", path)
	require.ErrorContains(t, err, "reading CA certificate")
}
