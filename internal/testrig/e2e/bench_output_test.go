package e2e_test

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// outputBenchCommands are the commands the live-output benchmark compares: one that
// prints nothing and one that prints 1 MiB (16 KiB lines), in a balanced order so that
// neither always runs on a warmer stack.
var outputBenchCommands = []struct {
	name    string
	command string
}{
	{"silent", "true"},
	{"1MiB", "head -c 1048576 /dev/zero | tr '\\000' 'x' | fold -w 16383"},
	{"1MiB", "head -c 1048576 /dev/zero | tr '\\000' 'x' | fold -w 16383"},
	{"silent", "true"},
}

// BenchmarkDeployment200TargetsOutput runs the 200-target deployment of
// BenchmarkDeployment200Targets twice with a command that prints nothing and twice with
// one that prints 1 MiB on every target, in one run on one fleet, and reports each
// side's mean create-to-last-result time, their ratio, and the live output Mandible
// stored per target.
func BenchmarkDeployment200TargetsOutput(b *testing.B) {
	for range b.N {
		times := map[string][]time.Duration{}
		var storedPerTarget float64
		scenario(b, "deployment-200-output", func(t *testing.T) {
			c := setupExecCluster(t, time.Minute)
			th := c.startThorax(t)
			instance := c.waitRegistered(t, th)
			agents := startFleet(t, c, th, instance)
			for i, run := range outputBenchCommands {
				id, elapsed := deployCommandToFleet(t, c, agents, fmt.Sprintf("output-%d", i), run.command)
				times[run.name] = append(times[run.name], elapsed)
				if run.name == "1MiB" {
					var stored int64
					require.NoError(t, c.pool.QueryRow(c.ctx, `SELECT coalesce(sum(length(data)), 0) FROM command_output WHERE deployment_id = $1`, id).Scan(&stored))
					storedPerTarget = float64(stored) / deployBenchTargets
				}
			}
		})
		silent, loud := meanSeconds(times["silent"]), meanSeconds(times["1MiB"])
		b.ReportMetric(silent, "silent-s")
		b.ReportMetric(loud, "1MiB-s")
		b.ReportMetric(loud/silent, "1MiB/silent")
		b.ReportMetric(storedPerTarget/1024, "stored-KiB/target")
		b.Logf("\n%d targets, 1 step, create -> last result: silent %v (mean %.2f s), 1 MiB of output each %v (mean %.2f s); 1MiB/silent %.3f; live output stored per target %.0f KiB",
			deployBenchTargets, times["silent"], silent, times["1MiB"], loud, loud/silent, storedPerTarget/1024)
	}
}

// deployCommandToFleet runs a one-step deployment of command on agents and returns its
// id and the time from its creation to the last result.
func deployCommandToFleet(t *testing.T, c *execCluster, agents []string, name, command string) (string, time.Duration) {
	t.Helper()
	quoted := make([]string, len(agents))
	for i, a := range agents {
		quoted[i] = strconv.Quote(a)
	}
	spec := fmt.Sprintf(`{"name":%q,"targets":[%s],"steps":[{"name":"print","command":%q}]}`, name, strings.Join(quoted, ","), command)
	start := time.Now()
	code, created := api(t, c.mandible.replica, http.MethodPost, "/api/v1/deployments", spec)
	require.Equal(t, http.StatusAccepted, code, created)
	id := created["id"].(string)
	var last *time.Time
	require.Eventually(t, func() bool {
		var n int
		require.NoError(t, c.pool.QueryRow(c.ctx, `SELECT count(*), max(finished_at) FROM command_queue WHERE deployment_id = $1 AND status = 'succeeded'`, id).Scan(&n, &last))
		return n == deployBenchTargets
	}, 5*time.Minute, 20*time.Millisecond, "not every target finished")
	waitDeployment(t, c.mandible.replica, id, "succeeded")
	return id, last.Sub(start)
}
