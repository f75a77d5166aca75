package e2e_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/testrig/testenv"
)

// mantisctlWithToken runs the CLI binary against a replica with token.
func mantisctlWithToken(t *testing.T, r *replica, token string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(testenv.Binary(t, "mantisctl"), args...)
	cmd.Env = append(os.Environ(), "MANTIS_API_URL=http://"+r.HTTPAddr, "MANTIS_API_TOKEN="+token, "MANTIS_CONTEXT=")
	out, err := cmd.CombinedOutput()
	if err != nil {
		var exitErr *exec.ExitError
		require.ErrorAs(t, err, &exitErr, string(out))
		return string(out), exitErr.ExitCode()
	}
	return string(out), 0
}

// mantisctl's exit codes against a real Mandible: a wait that times out exits 6, a
// cancelled deployment 3, a refused token 4, an invalid spec 2, and get of any
// deployment 0. With nothing to execute its command, the deployment runs until it is
// cancelled.
func TestCLIExitCodesOfTimeoutCancelAuthAndUsage(t *testing.T) {
	f := setupDispatchFixture(t, 1)
	r := startReplica(t, replicaOptions{ID: uniqueName("cliexit"), DatabaseURL: f.url, Temporal: f.temporal, PollInterval: "1s"})

	out, code := mantisctl(t, r, "deploy", "-o", "json", "-f",
		writeFile(t, fmt.Sprintf(`{"name":"stuck","targets":[%q],"steps":[{"name":"wait","command":"sleep 600"}]}`, f.targets[0])))
	require.Equal(t, 0, code, out)
	var created struct{ ID string }
	require.NoError(t, json.Unmarshal([]byte(out), &created))

	out, code = mantisctl(t, r, "watch", created.ID, "--timeout", "2s")
	require.Equal(t, 6, code, "the wait timed out:\n%s", out)
	require.Contains(t, out, "timed out")

	out, code = mantisctl(t, r, "cancel", created.ID)
	require.Equal(t, 0, code, out)
	out, code = mantisctl(t, r, "watch", created.ID, "-o", "jsonl", "--timeout", "2m")
	require.Equal(t, 3, code, "a cancelled deployment exits 3:\n%s", out)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var last struct {
		Type string
		Data struct{ Status string }
	}
	require.NoError(t, json.Unmarshal([]byte(lines[len(lines)-1]), &last), out)
	require.Equal(t, "summary", last.Type)
	require.Equal(t, "cancelled", last.Data.Status)
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		require.True(t, json.Valid(sc.Bytes()), "every line is a JSON object: %q", sc.Text())
	}

	out, code = mantisctl(t, r, "get", created.ID)
	require.Equal(t, 0, code, "get of a cancelled deployment succeeds:\n%s", out)
	require.Contains(t, out, "CANCELLED")

	out, code = mantisctlWithToken(t, r, "not-a-known-token-0123456789", "list")
	require.Equal(t, 4, code, out)

	out, code = mantisctl(t, r, "deploy", "-f", writeFile(t, `{"name":"x","steps":[{"name":"a","command":""}]}`))
	require.Equal(t, 2, code, out)
	out, code = mantisctl(t, r, "list", "--limit", "100000")
	require.Equal(t, 2, code, "an HTTP 400 exits 2:\n%s", out)
}
