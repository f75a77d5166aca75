package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/testenv"
)

// execute executes the root command in process with args and returns what it printed.
func execute(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := newRootCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(context.Background())
	return out.String(), err
}

// isolateEnv removes the MANTIS_ variables for the test, so that neither the
// developer's shell nor `mantisctl dev exec` decides what the configuration holds.
// Tests that call it cannot run in parallel.
func isolateEnv(t *testing.T) {
	t.Helper()
	for _, kv := range os.Environ() {
		k, v, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "MANTIS_") {
			t.Setenv(k, v) // restores the value when the test ends
			require.NoError(t, os.Unsetenv(k))
		}
	}
}

func writeConfig(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "thorax.toml")
	require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
	return path
}

// problemLines returns the lines of a configuration error after its heading, sorted.
func problemLines(t *testing.T, err error) []string {
	t.Helper()
	require.Error(t, err)
	heading, body, ok := strings.Cut(err.Error(), "\n")
	require.True(t, ok, "one problem per line after a heading: %q", err)
	require.Equal(t, "invalid configuration:", heading)
	lines := strings.Split(body, "\n")
	slices.Sort(lines)
	return lines
}

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
