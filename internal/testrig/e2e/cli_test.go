package e2e_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/testrig/testenv"
)

// mantisctl runs the CLI binary against a replica and returns its output and exit code.
func mantisctl(t *testing.T, r *replica, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(testenv.Binary(t, "mantisctl"), args...)
	cmd.Env = append(os.Environ(), "MANTIS_API_URL=http://"+r.HTTPAddr, "MANTIS_API_TOKEN="+apiToken)
	out, err := cmd.CombinedOutput()
	code := 0
	if err != nil {
		var exitErr *exec.ExitError
		require.ErrorAs(t, err, &exitErr, string(out))
		code = exitErr.ExitCode()
	}
	return string(out), code
}

//mantis:temporal-server
func TestCLIDeployWatchGetListAndRun(t *testing.T) {
	f := setupDispatchFixture(t, 2)
	r := startReplica(t, replicaOptions{ID: uniqueName("cli"), DatabaseURL: f.url, Temporal: f.temporal, PollInterval: "1s"})
	fakeExecutor(t, f, f.targets)

	specPath := filepath.Join(t.TempDir(), "release.yaml")
	require.NoError(t, os.WriteFile(specPath, []byte(fmt.Sprintf(`
name: release
targets: [%s, %s]
steps:
  - name: fetch
    command: echo fetch
  - name: install
    command: echo install
  - name: restart
    command: echo restart
`, f.targets[0], f.targets[1])), 0o600))
	out, code := mantisctl(t, r, "deploy", "-f", specPath, "--watch")
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "deployment release SUCCEEDED")
	for _, step := range []string{"fetch", "install", "restart"} {
		require.Contains(t, out, "step "+step)
	}

	out, code = mantisctl(t, r, "list", "-o", "json")
	require.Equal(t, 0, code, out)
	var list []struct{ ID, Status string }
	require.NoError(t, json.Unmarshal([]byte(out), &list))
	require.Len(t, list, 1)
	require.Equal(t, "succeeded", list[0].Status)

	out, code = mantisctl(t, r, "get", list[0].ID, "-o", "json")
	require.Equal(t, 0, code, out)
	require.Contains(t, out, `"status": "succeeded"`)
	// The replica's token is the deprecated flat list's first, recorded as legacy-1.
	require.Contains(t, out, `"created_by": "legacy-1"`)
	out, code = mantisctl(t, r, "get", list[0].ID)
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "created by legacy-1")

	out, code = mantisctl(t, r, "run", "--targets", f.targets[0], "--", "fail", "deploy-tool")
	require.Equal(t, 1, code, "a failed run exits non-zero:\n%s", out)
	require.Contains(t, out, "--- "+f.targets[0]+" (exit 127)")
	require.Contains(t, out, "deploy-tool: not found")

	out, code = mantisctl(t, r, "deploy", "-f", writeFile(t, `{"name":"x","steps":[{"name":"a","command":""}]}`))
	require.NotEqual(t, 0, code)
	require.Contains(t, out, "steps[0].command: required")
	require.Contains(t, out, "targets: name at least one target")
}

func writeFile(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "spec.json")
	require.NoError(t, os.WriteFile(p, []byte(strings.TrimSpace(content)), 0o600))
	return p
}
