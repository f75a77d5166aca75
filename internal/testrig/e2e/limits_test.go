package e2e_test

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Two deployments on one target, submitted together, never run their commands at the
// same time: the per-target default (one running command, across deployments) holds
// one back until the other's command ends. Each command writes its own start and end
// times (the agent host's clock, in nanoseconds) to a ledger; the test checks that no
// two runs overlap, and that both deployments succeed.
func TestTwoDeploymentsOnOneTargetNeverOverlap(t *testing.T) {
	s := setupExec(t)
	r := s.mandible.replica
	ledger := filepath.Join(t.TempDir(), "ledger")
	command := func(name string) string {
		return fmt.Sprintf(`echo "start $(date +%%s%%N) %[1]s" >> %[2]s; sleep 0.3; echo "end $(date +%%s%%N) %[1]s" >> %[2]s`, name, ledger)
	}
	var ids []string
	for _, d := range []string{"one", "two"} {
		spec := fmt.Sprintf(`{"name":"limits-%s","targets":[%q],"steps":[{"name":"a","command":%q},{"name":"b","command":%q}]}`,
			d, s.poll.Name, command(d+"-a"), command(d+"-b"))
		code, created := api(t, r, http.MethodPost, "/api/v1/deployments", spec)
		require.Equal(t, http.StatusAccepted, code, created)
		ids = append(ids, created["id"].(string))
	}
	for _, id := range ids {
		waitDeployment(t, r, id, "succeeded")
	}

	raw, err := os.ReadFile(ledger)
	require.NoError(t, err)
	type run struct {
		name       string
		start, end int64
	}
	runs := map[string]*run{}
	for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		f := strings.Fields(line)
		require.Len(t, f, 3, "ledger line %q", line)
		at, err := strconv.ParseInt(f[1], 10, 64)
		require.NoError(t, err)
		if runs[f[2]] == nil {
			runs[f[2]] = &run{name: f[2]}
		}
		if f[0] == "start" {
			runs[f[2]].start = at
		} else {
			runs[f[2]].end = at
		}
	}
	require.Len(t, runs, 4, "every step of both deployments ran once:\n%s", raw)
	var ordered []*run
	for _, r := range runs {
		require.NotZero(t, r.start, r.name)
		require.NotZero(t, r.end, r.name)
		ordered = append(ordered, r)
	}
	sort.Slice(ordered, func(i, j int) bool { return ordered[i].start < ordered[j].start })
	for i := 1; i < len(ordered); i++ {
		require.GreaterOrEqual(t, ordered[i].start, ordered[i-1].end,
			"%s started before %s ended: two commands ran on %s at once\n%s", ordered[i].name, ordered[i-1].name, s.poll.Name, raw)
	}
}
