package clitest

import (
	"bytes"
	"os/exec"
	"regexp"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"
)

// versionLine is what `NAME --version` prints: the version, the commit (12 hex
// digits, "+dirty" for a checkout with uncommitted changes, or "unknown" for a
// build without VCS stamping, as under GOFLAGS=-buildvcs=false) and the Go
// version.
var versionLine = regexp.MustCompile(`^(\S+) (\S+) \(commit ([0-9a-f]{12}(?:\+dirty)?|unknown), (go\S+)\)\n$`)

// RequireVersion runs the built binary bin with --version, with no configuration
// at all, and checks that it exits 0 printing name, a version, the commit it was
// built from and the Go version that built it, on one line.
func RequireVersion(t *testing.T, bin, name string) {
	t.Helper()
	cmd := exec.Command(bin, "--version")
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Run(), "%s --version: %s", name, stderr.String())
	m := versionLine.FindStringSubmatch(stdout.String())
	require.NotNil(t, m, "%s --version printed %q", name, stdout.String())
	require.Equal(t, name, m[1])
	require.NotEmpty(t, m[2], "version")
	require.Equal(t, runtime.Version(), m[4], "the Go version that built it (the tests' own toolchain)")
	require.Empty(t, stderr.String())
}
