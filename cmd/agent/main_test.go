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
	path := filepath.Join(t.TempDir(), "agent.toml")
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
