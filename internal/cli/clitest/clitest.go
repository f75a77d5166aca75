// Package clitest holds what the tests of the daemons' commands (mandible, thorax,
// agent) share: running a root command in process, a configuration file of the test's
// own, an environment without the developer's MANTIS_ variables, and reading the
// plain-HTTP health and metrics endpoints.
package clitest

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/require"
)

// Execute runs cmd in process with args and returns what it printed.
func Execute(t *testing.T, cmd *cobra.Command, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(context.Background())
	return out.String(), err
}

// IsolateEnv removes the MANTIS_ variables, and the other names given, for the test,
// so that neither the developer's shell nor `mantisctl dev exec` decides what the
// configuration holds. Tests that call it cannot run in parallel.
func IsolateEnv(t *testing.T, alsoNames ...string) {
	t.Helper()
	for _, kv := range os.Environ() {
		k, v, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "MANTIS_") || slices.Contains(alsoNames, k) {
			t.Setenv(k, v) // restores the value when the test ends
			require.NoError(t, os.Unsetenv(k))
		}
	}
}

// WriteConfig writes content to a file called name in a directory of the test's own
// and returns its path.
func WriteConfig(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
	return path
}

// ProblemLines returns the lines of a configuration error after its heading, sorted.
func ProblemLines(t *testing.T, err error) []string {
	t.Helper()
	require.Error(t, err)
	heading, body, ok := strings.Cut(err.Error(), "\n")
	require.True(t, ok, "one problem per line after a heading: %q", err)
	require.Equal(t, "invalid configuration:", heading)
	lines := strings.Split(body, "\n")
	slices.Sort(lines)
	return lines
}

// FreeAddress returns a loopback address nothing listens on at the moment of the call.
func FreeAddress(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return addr
}

// Body fetches url and returns its body, or "" when it does not answer 200.
func Body(url string) string {
	resp, err := http.Get(url)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		return ""
	}
	return string(b)
}

// Ready fetches the listener's /readyz and returns its status and body; 0 when it
// does not answer.
func Ready(t *testing.T, addr string) (int, string) {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/readyz")
	if err != nil {
		return 0, ""
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}
