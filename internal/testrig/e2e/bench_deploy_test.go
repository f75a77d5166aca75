package e2e_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/mantis-deploy/mantis/internal/testrig/testenv"
)

// deployBenchTargets is the fleet size of the deployment benchmark.
const deployBenchTargets = 200

// BenchmarkDeployment200Targets measures a 1-step deployment on 200 local poll-mode
// agent processes behind one Thorax: the time from create to the last result (goal:
// under 5 s on the dev stack) and the Temporal history it cost.
func BenchmarkDeployment200Targets(b *testing.B) {
	for range b.N {
		var (
			elapsed        time.Duration
			events, hbytes int64
		)
		scenario(b, "deployment-200", func(t *testing.T) {
			c := setupExecCluster(t, 10*time.Second)
			th := c.startThorax(t)
			instance := c.waitRegistered(t, th)
			agents := make([]string, deployBenchTargets)
			var wg sync.WaitGroup
			var mu sync.Mutex
			for i := range deployBenchTargets {
				wg.Add(1)
				go func() {
					defer wg.Done()
					a := c.startPollAgent(t, th)
					mu.Lock()
					agents[i] = a.Name
					mu.Unlock()
				}()
			}
			wg.Wait()
			require.Eventually(t, func() bool {
				var n int
				require.NoError(t, c.pool.QueryRow(c.ctx, `SELECT count(*) FROM targets WHERE assigned_instance_id = $1`, instance).Scan(&n))
				return n == deployBenchTargets
			}, 3*time.Minute, 200*time.Millisecond, "not every agent registered through thorax")

			names := make([]string, len(agents))
			for i, a := range agents {
				names[i] = fmt.Sprintf("%q", a)
			}
			spec := fmt.Sprintf(`{"name":"fleet","targets":[%s],"steps":[{"name":"noop","command":"true"}]}`, strings.Join(names, ","))
			start := time.Now()
			code, created := api(t, c.mandible.replica, http.MethodPost, "/api/v1/deployments", spec)
			require.Equal(t, http.StatusAccepted, code, created)
			id := created["id"].(string)
			var last *time.Time
			require.Eventually(t, func() bool {
				var n int
				require.NoError(t, c.pool.QueryRow(c.ctx, `SELECT count(*), max(finished_at) FROM command_queue WHERE deployment_id = $1 AND status = 'succeeded'`, id).Scan(&n, &last))
				return n == deployBenchTargets
			}, 2*time.Minute, 20*time.Millisecond, "not every target finished")
			elapsed = last.Sub(start)
			waitDeployment(t, c.mandible.replica, id, "succeeded")

			tc, err := client.Dial(client.Options{HostPort: testenv.TemporalServer(t).Address})
			require.NoError(t, err)
			defer tc.Close()
			desc, err := tc.WorkflowService().DescribeWorkflowExecution(context.Background(), &workflowservice.DescribeWorkflowExecutionRequest{
				Namespace: "default", Execution: &commonpb.WorkflowExecution{WorkflowId: "deployment:" + id},
			})
			require.NoError(t, err)
			events = desc.GetWorkflowExecutionInfo().GetHistoryLength()
			hbytes = desc.GetWorkflowExecutionInfo().GetHistorySizeBytes()
		})
		b.ReportMetric(elapsed.Seconds(), "create-to-last-result-s")
		b.ReportMetric(float64(events), "history-events")
		b.ReportMetric(float64(hbytes)/1024, "history-KiB")
		b.Logf("\n%d targets, 1 step: create -> last result %.2f s (goal < 5 s); history %d events, %.0f KiB",
			deployBenchTargets, elapsed.Seconds(), events, float64(hbytes)/1024)
	}
}
