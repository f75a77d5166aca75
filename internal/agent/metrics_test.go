package agent_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/mantis-deploy/mantis/internal/agent"
)

// commandMetrics gathers reg: the runs counted by outcome, the runs timed and
// the output observed.
func commandMetrics(t *testing.T, reg *prometheus.Registry) (byOutcome map[string]float64, timed uint64, outputBytes float64) {
	t.Helper()
	families, err := reg.Gather()
	require.NoError(t, err)
	byOutcome = map[string]float64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			switch f.GetName() {
			case agent.CommandsMetric:
				byOutcome[m.GetLabel()[0].GetValue()] = m.GetCounter().GetValue()
			case agent.CommandDurationMetric:
				timed += m.GetHistogram().GetSampleCount()
			case agent.OutputBytesMetric:
				outputBytes += m.GetHistogram().GetSampleSum()
			}
		}
	}
	return byOutcome, timed, outputBytes
}

func TestRunsAreCountedByOutcomeTimedAndTheirOutputMeasured(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	r := newRunner(t, nil)
	agent.SetRunnerMetrics(r, agent.NewMetrics(reg))
	ctx := context.Background()

	_, err := r.Run(ctx, command("echo hello"))
	require.NoError(t, err)
	_, err = r.Run(ctx, command("exit 3"))
	require.NoError(t, err)
	slow := command("sleep 5")
	slow.Timeout = durationpb.New(100 * time.Millisecond)
	_, err = r.Run(ctx, slow)
	require.NoError(t, err)

	byOutcome, timed, output := commandMetrics(t, reg)
	require.Equal(t, map[string]float64{"succeeded": 1, "failed": 1, "timed_out": 1}, byOutcome)
	require.Equal(t, uint64(3), timed)
	require.Equal(t, float64(len("hello\n")), output)
}

func TestReadinessIsStartingUntilTheAgentSaysHowToTell(t *testing.T) {
	t.Parallel()
	m := agent.NewMetrics(prometheus.NewRegistry())
	require.EqualError(t, m.Readiness(), "starting")
}
