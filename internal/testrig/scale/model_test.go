package scale_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/testrig/scale"
)

func TestFitLineRecoversBaseAndSlope(t *testing.T) {
	l := scale.FitLine([]int{1, 2, 4}, []float64{2, 2.5, 3.5})
	require.InDelta(t, 2, l.Base, 1e-9)
	require.InDelta(t, 0.5, l.PerReplica, 1e-9)
	require.InDelta(t, 51.5, l.At(100), 1e-9)
	require.Equal(t, scale.Line{Base: 3}, scale.FitLine([]int{2, 2}, []float64{2, 4}), "one replica count: the mean")
}

// size builds a measured size whose tiers spent perReq CPU per request over 100
// requests after an idle second.
func size(replicas int, mandiblePerReq, agentsPerReq float64) scale.Size {
	ms := func(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
	return scale.Size{Replicas: replicas, Thoraxes: 2, Agents: 10, Requests: 100, Succeeded: 100, Drain: 2 * time.Second,
		Claims:     scale.Claims{Won: 100, Lost: float64(replicas - 1)},
		IdleWindow: time.Second, LoadWindow: 2 * time.Second,
		IdleCPU: map[scale.Tier]time.Duration{scale.TierAgents: ms(0.1), scale.TierMandible: ms(0.01 * float64(replicas))},
		LoadCPU: map[scale.Tier]time.Duration{
			scale.TierAgents:   ms(0.2 + 100*agentsPerReq),
			scale.TierMandible: ms(0.02*float64(replicas) + 100*mandiblePerReq),
		},
	}
}

func TestFitSeparatesIdleCostAndContention(t *testing.T) {
	// Mandible's cost per request grows by 1 ms per extra replica; the agents' does
	// not depend on replicas, and a noisy slope of theirs is ignored.
	sizes := []scale.Size{size(1, 0.004, 0.010), size(2, 0.005, 0.012), size(4, 0.007, 0.008)}
	m := scale.Fit(sizes)
	require.InDelta(t, 0.004, m[scale.TierMandible].PerRequest.Base, 1e-6)
	require.InDelta(t, 0.001, m[scale.TierMandible].PerRequest.PerReplica, 1e-6)
	require.InDelta(t, 0.010, m[scale.TierAgents].PerRequest.Base, 1e-6)
	require.Zero(t, m[scale.TierAgents].PerRequest.PerReplica)
	require.InDelta(t, 0.01, m[scale.TierAgents].IdlePerProcess, 1e-6, "0.1 core over 10 agents")
	require.InDelta(t, 0.01, m[scale.TierMandible].IdlePerProcess, 1e-6)

	cores := m.Cores(scale.Fleet{Replicas: 100, Thoraxes: 20, Agents: 10000, Rate: 1000})
	require.InDelta(t, (0.004+0.001*99)*1000+0.01*100, cores[scale.TierMandible], 1e-6)
	require.InDelta(t, 0.010*1000+0.01*10000, cores[scale.TierAgents], 1e-6)
	_, harness := cores[scale.TierHarness]
	require.False(t, harness, "the harness is no part of a deployment")
}

func TestSizeFigures(t *testing.T) {
	s := size(3, 0.004, 0.010)
	require.InDelta(t, 50, s.Throughput(), 1e-9)
	require.InDelta(t, 2.0/102, s.Wasted(), 1e-9)
	require.InDelta(t, 0.1, s.IdleRate(scale.TierAgents), 1e-9)
	require.InDelta(t, (0.2+1.0)/100, s.PerRequest(scale.TierAgents), 1e-9)
	require.InDelta(t, 0.010, s.MarginalPerRequest(scale.TierAgents), 1e-9)
}

func TestReportShowsEverySizeAndTheModel(t *testing.T) {
	sizes := []scale.Size{size(1, 0.004, 0.010), size(2, 0.005, 0.012)}
	sizes[1].PeakConns = map[scale.ConnClass]int{scale.ConnMantis: 16, scale.ConnTemporal: 23, scale.ConnOther: 2}
	r := scale.Report{Date: time.Date(2026, 1, 2, 3, 4, 0, 0, time.UTC), Machine: "2 cores, 8.0 GiB memory",
		LoadBefore: "1.00 2.00 3.00", LoadAfter: "4.00 5.00 6.00", Temporal: "server", Sizes: sizes,
		Model: scale.Fit(sizes), Target: scale.Fleet{Replicas: 100, Thoraxes: 20, Agents: 10000, Rate: 1000},
		Notes:    []string{"1 replica(s): 9 of 10 agents' targets were assigned"},
		Problems: []string{"2 replica(s): 90 of 100 requests succeeded"}}
	out := r.Markdown()
	for _, want := range []string{"2026-01-02", "2 cores, 8.0 GiB memory", "1.00 2.00 3.00", "4.00 5.00 6.00",
		"| 2 | 2 | 10 | 100 | 100 | 2s | 50.0 | 0.99% (1/101) |", "16 / 23 / 2", "mostly measure contention",
		"| mandible | 4.000 | 1.000 |", "9 of 10 agents'", "90 of 100"} {
		require.True(t, strings.Contains(out, want), "the report lacks %q:\n%s", want, out)
	}
}
