package temporalclient_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/temporalclient"
)

func TestRecordsCountersGaugesAndTimersWithTagsAsLabels(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	h := temporalclient.NewMetricsHandler(reg).WithTags(map[string]string{"namespace": "default"})
	poll := h.WithTags(map[string]string{"operation": "PollWorkflowTaskQueue"})
	poll.Counter("temporal_request").Inc(2)
	poll.Counter("temporal_request").Inc(1)
	h.Gauge("temporal_num_pollers").Update(3)
	poll.Timer("temporal_request_latency").Record(1500 * time.Millisecond)

	families, err := reg.Gather()
	require.NoError(t, err)
	names := map[string]bool{}
	for _, f := range families {
		names[f.GetName()] = true
	}
	require.Equal(t, map[string]bool{
		"temporal_request_total": true, "temporal_num_pollers": true, "temporal_request_latency_seconds": true,
	}, names)
	require.Equal(t, map[string]float64{`{namespace="default",operation="PollWorkflowTaskQueue"}`: 3},
		series(t, reg, "temporal_request_total"))
	require.Equal(t, map[string]float64{`{namespace="default"}`: 3}, series(t, reg, "temporal_num_pollers"))
	require.Equal(t, map[string]float64{`{namespace="default",operation="PollWorkflowTaskQueue"}`: 1.5},
		series(t, reg, "temporal_request_latency_seconds"))
}

func TestALaterUseWithOtherTagsKeepsTheFirstLabels(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	h := temporalclient.NewMetricsHandler(reg)
	h.WithTags(map[string]string{"namespace": "a", "task_queue": "q"}).Counter("temporal_poll").Inc(1)
	h.WithTags(map[string]string{"namespace": "b", "worker_type": "w"}).Counter("temporal_poll").Inc(1)
	require.Equal(t, map[string]float64{`{namespace="a",task_queue="q"}`: 1, `{namespace="b",task_queue=""}`: 1},
		series(t, reg, "temporal_poll_total"))
}

func TestSanitizeName(t *testing.T) {
	t.Parallel()
	require.Equal(t, "temporal_request", temporalclient.SanitizeName("temporal_request"))
	require.Equal(t, "temporal_sticky_cache_hit", temporalclient.SanitizeName("sticky-cache.hit"))
	require.Equal(t, "_1x", temporalclient.SanitizeLabel("1x"))
	require.Equal(t, "task_queue", temporalclient.SanitizeLabel("task-queue"))
}

// series gathers reg and returns the family name's values by label set: a
// counter's or gauge's value, a histogram's sum.
func series(t *testing.T, reg *prometheus.Registry, name string) map[string]float64 {
	t.Helper()
	families, err := reg.Gather()
	require.NoError(t, err)
	out := map[string]float64{}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			key := "{" + strings.Join(labels, ",") + "}"
			switch {
			case m.GetCounter() != nil:
				out[key] = m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				out[key] = m.GetGauge().GetValue()
			case m.GetHistogram() != nil:
				out[key] = m.GetHistogram().GetSampleSum()
			}
		}
	}
	return out
}
