package main

import (
	"bytes"
	"context"
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

func isolateEnv(t *testing.T) { clitest.IsolateEnv(t) }

func writeConfig(t *testing.T, content string) string {
	return clitest.WriteConfig(t, "thorax.toml", content)
}

func problemLines(t *testing.T, err error) []string { return clitest.ProblemLines(t, err) }

func TestHelpListsSubcommandsAndFlags(t *testing.T) {
	t.Parallel()
	out, err := execute(t, "--help")
	require.NoError(t, err)
	for _, want := range []string{"thorax", "check-config", "--config", "MANTIS_<SECTION>_<KEY>"} {
		require.Contains(t, out, want)
	}
}

func TestCheckConfigListsEveryProblemByKey(t *testing.T) {
	isolateEnv(t)
	t.Setenv("MANTIS_HEARTBEAT_INTERVAL", "often")
	path := writeConfig(t, `
name = "thorax-1"
shard = 3

[mandible]
insecure = true

[queue]
enabled = true
host = "localhost"
username = "mantis"
password = "broker-password-not-for-output"
prefetch_count = 0

[polling]
interval = "-1s"

[agents]
insecure = true
`)
	_, err := execute(t, "check-config", "--config", path)
	lines := problemLines(t, err)
	want := []string{
		"MANTIS_HEARTBEAT_INTERVAL: ",
		"polling.interval: must be positive",
		"queue.ca_cert_path: required when queue.enabled = true",
		"queue.prefetch_count: must be 1-65535",
		"shard: unknown key",
	}
	require.Len(t, lines, len(want), "one line per problem:\n%s", err)
	for i, prefix := range want {
		require.True(t, strings.HasPrefix(lines[i], prefix), "line %q should start with %q", lines[i], prefix)
	}
	require.NotContains(t, err.Error(), "broker-password-not-for-output")
}

func TestCheckConfigRejectsMalformedTOML(t *testing.T) {
	isolateEnv(t)
	path := writeConfig(t, "[queue\nenabled = yes\n")
	_, err := execute(t, "check-config", "--config", path)
	require.ErrorContains(t, err, path)
}

func TestCheckConfigAcceptsShippedConfigAndRedactsSecrets(t *testing.T) {
	isolateEnv(t)
	out, err := execute(t, "check-config", "--config", filepath.Join(testenv.RepoRoot(t), "deploy", "thorax.toml"))
	require.NoError(t, err)
	require.Contains(t, out, "prefetch_count = 10")
	require.Contains(t, out, "[redacted]")
	require.NotContains(t, out, "the mantis broker user's password")
}

// syncBuffer is a bytes.Buffer that the command's goroutines and the test may
// use at once.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func closedAddress(t *testing.T) string { return clitest.FreeAddress(t) }

func TestServeRetriesRegistrationAndStopsCleanlyWhenSignalled(t *testing.T) {
	isolateEnv(t)
	path := writeConfig(t, `
name = "thorax-1"

[mandible]
address = "`+closedAddress(t)+`"
insecure = true

[agents]
listen = "127.0.0.1:0"
insecure = true
`)
	cmd := newRootCommand()
	var out syncBuffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs([]string{"--config", path})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()

	require.Eventually(t, func() bool {
		return strings.Count(out.String(), "registering with mandible failed, retrying") >= 2
	}, 10*time.Second, 10*time.Millisecond, "registration is retried while Mandible does not answer:\n%s", out.String())
	for _, want := range []string{"mandible.insecure = true", "agents.insecure = true", "serving agents"} {
		require.Contains(t, out.String(), want)
	}

	cancel() // as SIGTERM does
	select {
	case err := <-done:
		require.NoError(t, err, "a stop is a clean exit")
	case <-time.After(10 * time.Second):
		t.Fatal("thorax did not stop")
	}
}

func TestServeNamesUnreadableCertificates(t *testing.T) {
	isolateEnv(t)
	dir := t.TempDir()
	path := writeConfig(t, `
[mandible]
ca_cert_path = "`+filepath.Join(dir, "ca.crt")+`"
cert_path = "`+filepath.Join(dir, "thorax.crt")+`"
key_path = "`+filepath.Join(dir, "thorax.key")+`"

[agents]
listen = "127.0.0.1:0"
insecure = true
`)
	_, err := execute(t, "--config", path)
	require.ErrorContains(t, err, "mandible TLS")
	require.ErrorContains(t, err, filepath.Join(dir, "ca.crt"))
}
