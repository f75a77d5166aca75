package e2e_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/mantis-deploy/mantis/internal/codec"
	"github.com/mantis-deploy/mantis/internal/testrig/testenv"
)

// codecBenchOrder is the order of the measured deployments, codec on or off: balanced,
// so that neither side always runs on a warmer stack.
var codecBenchOrder = []bool{false, true, true, false}

// BenchmarkDeployment200TargetsCodec runs the 200-target deployment of
// BenchmarkDeployment200Targets with Mandible's payload codec off and on, in one run on
// one fleet: Mandible is restarted at the same addresses between deployments, with or
// without a codec keyring. It reports each side's mean create-to-last-result time and
// their ratio (the requirement: the codec costs at most 10%).
func BenchmarkDeployment200TargetsCodec(b *testing.B) {
	for range b.N {
		times := map[bool][]time.Duration{}
		scenario(b, "deployment-200-codec", func(t *testing.T) {
			// A heartbeat timeout beyond a restart: Thorax keeps its instance.
			c := setupExecCluster(t, time.Minute)
			th := c.startThorax(t)
			instance := c.waitRegistered(t, th)
			agents := startFleet(t, c, th, instance)
			keyFile := filepath.Join(t.TempDir(), "codec.keys")
			_, err := codec.WriteKeyFile(keyFile, "bench")
			require.NoError(t, err)
			for i, on := range codecBenchOrder {
				restartMandible(t, c, instance, on, keyFile)
				id, elapsed := deployToFleet(t, c, agents, fmt.Sprintf("fleet-%d", i))
				requireInputEncrypted(t, id, on)
				times[on] = append(times[on], elapsed)
			}
		})
		off, on := meanSeconds(times[false]), meanSeconds(times[true])
		b.ReportMetric(off, "codec-off-s")
		b.ReportMetric(on, "codec-on-s")
		b.ReportMetric(on/off, "on/off")
		b.Logf("\n%d targets, 1 step, create -> last result: codec off %v (mean %.2f s), codec on %v (mean %.2f s); on/off %.3f (goal <= 1.10)",
			deployBenchTargets, times[false], off, times[true], on, on/off)
	}
}

// startFleet starts deployBenchTargets poll agents on th and waits until every one is
// assigned to instance; it returns their names.
func startFleet(t *testing.T, c *execCluster, th *thoraxProcess, instance uuid.UUID) []string {
	t.Helper()
	agents := make([]string, deployBenchTargets)
	done := make(chan struct{}, deployBenchTargets)
	for i := range deployBenchTargets {
		go func() {
			defer func() { done <- struct{}{} }()
			agents[i] = c.startPollAgent(t, th).Name
		}()
	}
	for range deployBenchTargets {
		<-done
	}
	require.Eventually(t, func() bool {
		var n int
		require.NoError(t, c.pool.QueryRow(c.ctx, `SELECT count(*) FROM targets WHERE assigned_instance_id = $1`, instance).Scan(&n))
		return n == deployBenchTargets
	}, 3*time.Minute, 200*time.Millisecond, "not every agent registered through thorax")
	return agents
}

// restartMandible stops the cluster's Mandible and starts another replica at the same
// addresses, with the codec keyring or without, and waits for the Thorax instance to
// heartbeat to it.
func restartMandible(t *testing.T, c *execCluster, instance uuid.UUID, codecOn bool, keyFile string) {
	t.Helper()
	addr, httpAddr := c.mandible.GRPCAddr, c.mandible.HTTPAddr
	c.mandible.stop(t)
	o := c.mandibleOptions
	// A new replica id: its dispatcher workflow and task queues are its own, never
	// replayed by a replica with the other codec setting.
	o.ID = uniqueName("bench")
	_, port, err := net.SplitHostPort(httpAddr)
	require.NoError(t, err)
	o.HTTPPort, err = strconv.Atoi(port)
	require.NoError(t, err)
	o.Env = append([]string(nil), o.Env...)
	if codecOn {
		o.Env = append(o.Env, "MANTIS_TEMPORAL_CODEC_KEY_FILE="+keyFile)
	}
	started := time.Now()
	c.mandible = startSecureReplicaAt(t, o, c.certs, c.heartbeatTimeout, addr)
	require.Eventually(t, func() bool {
		var last time.Time
		require.NoError(t, c.pool.QueryRow(c.ctx, `SELECT last_heartbeat_at FROM thorax_instances WHERE id = $1 AND status = 'live'`, instance).Scan(&last))
		return last.After(started)
	}, time.Minute, 50*time.Millisecond, "thorax never heartbeat to the restarted mandible")
}

// deployToFleet runs a one-step deployment on agents and returns its id and the time
// from its creation to the last result.
func deployToFleet(t *testing.T, c *execCluster, agents []string, name string) (string, time.Duration) {
	t.Helper()
	quoted := make([]string, len(agents))
	for i, a := range agents {
		quoted[i] = strconv.Quote(a)
	}
	spec := fmt.Sprintf(`{"name":%q,"targets":[%s],"steps":[{"name":"noop","command":"true"}]}`, name, strings.Join(quoted, ","))
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
	waitDeployment(t, c.mandible.replica, id, "succeeded")
	return id, last.Sub(start)
}

// requireInputEncrypted checks that the deployment's workflow input reached Temporal
// encrypted exactly when the codec was on: the benchmark measured what it says.
func requireInputEncrypted(t *testing.T, id string, on bool) {
	t.Helper()
	tsrv := testenv.TemporalServer(t)
	tc, err := client.Dial(client.Options{HostPort: tsrv.Address, Namespace: tsrv.Namespace})
	require.NoError(t, err)
	defer tc.Close()
	iter := tc.GetWorkflowHistory(context.Background(), "deployment:"+id, "", false, 0)
	first, err := iter.Next()
	require.NoError(t, err)
	input := first.GetWorkflowExecutionStartedEventAttributes().GetInput().GetPayloads()
	require.NotEmpty(t, input)
	encrypted := string(input[0].GetMetadata()[converter.MetadataEncoding]) == codec.Encoding
	require.Equal(t, on, encrypted, "codec on: %v", on)
}

func meanSeconds(ds []time.Duration) float64 {
	if len(ds) == 0 {
		return 0
	}
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	return sum.Seconds() / float64(len(ds))
}
