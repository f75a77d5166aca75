package thorax

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/broker"
	"github.com/mantis-deploy/mantis/internal/rpc"
)

// sample returns the values of family name in reg by their label values
// joined with ",": a counter's or gauge's value, a histogram's sample count.
func sample(t *testing.T, reg *prometheus.Registry, name string) map[string]float64 {
	t.Helper()
	families, err := reg.Gather()
	require.NoError(t, err)
	out := map[string]float64{}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			key := ""
			for _, l := range m.GetLabel() {
				key += l.GetValue()
			}
			switch {
			case m.GetCounter() != nil:
				out[key] = m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				out[key] = m.GetGauge().GetValue()
			case m.GetHistogram() != nil:
				out[key] = float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return out
}

func TestMetricsFollowClaimsCommandsHeldAndADrainThatGivesUp(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.cfg.Drain.Timeout.Duration = 200 * time.Millisecond
	agent := &fakeAgent{block: make(chan struct{})} // never closed
	agentAddr := f.startAgent(t, agent)
	f.mandible.queue(listenCommand("cmd-endless", agentAddr, 1))
	th := f.start(t)
	receive(t, agent.calls)
	reg := th.Registry()

	require.Equal(t, map[string]float64{"": 1}, sample(t, reg, RegisteredMetric))
	require.Equal(t, map[string]float64{"": 1}, sample(t, reg, CommandsHeldMetric))
	require.Equal(t, map[string]float64{"": 1}, sample(t, reg, CommandsFetchedMetric))
	require.Positive(t, sample(t, reg, FetchesMetric)[fetchOK])
	require.NoError(t, th.Readiness())

	th.stop()
	require.NoError(t, th.wait(t))
	require.Equal(t, map[string]float64{"": 1}, sample(t, reg, DrainDurationMetric), "one drain timed")
	require.Equal(t, map[string]float64{"": 1}, sample(t, reg, DrainAbandonedMetric), "the endless command abandoned")
	// Labels in name order: code, method, service.
	require.Positive(t, sample(t, reg, rpc.ClientHandledMetric)["OKFetchPendingCommandsmantis.v1.MandibleService"],
		"the calls to Mandible are counted")
}

func TestNudgeOutcomes(t *testing.T) {
	t.Parallel()
	for err, want := range map[error]string{
		nil: nudgeAcknowledged,
		fmt.Errorf("%w: %w", broker.ErrBusy, ErrDraining): nudgeBusy,
		fmt.Errorf("%w: bad id", broker.ErrUnprocessable): nudgeUnprocessable,
		ErrNotRegistered:                   nudgeUnregistered,
		errors.New("mandible unreachable"): nudgeFailed,
	} {
		require.Equal(t, want, nudgeOutcome(err), "%v", err)
	}
}
