package activities_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/activities"
	"github.com/mantis-deploy/mantis/internal/testrig/testenv"
	"github.com/mantis-deploy/mantis/schema"
)

// gauges gathers reg and returns the value of every series of family name, by
// its label values joined with ",".
func gauges(t *testing.T, reg *prometheus.Registry, name string) map[string]float64 {
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
			for i, l := range m.GetLabel() {
				if i > 0 {
					key += ","
				}
				key += l.GetValue()
			}
			out[key] = m.GetGauge().GetValue()
		}
	}
	return out
}

func TestStateGaugesReadThoraxInstancesAndRequestsNearExpiry(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := testenv.MigratedPool(t)
	reg := prometheus.NewRegistry()
	activities.NewMetrics(reg, pool)

	require.Equal(t, map[string]float64{"live": 0, "draining": 0, "dead": 0}, gauges(t, reg, activities.ThoraxInstancesMetric))
	require.Equal(t, map[string]float64{"": 0}, gauges(t, reg, activities.RequestsNearExpiryMetric))

	_, err := schema.RegisterInstance(ctx, pool, schema.NewInstance{Name: "thorax-a", Version: "test"})
	require.NoError(t, err)
	dead, err := schema.RegisterInstance(ctx, pool, schema.NewInstance{Name: "thorax-b", Version: "test"})
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `UPDATE thorax_instances SET status = 'dead', died_at = now() WHERE id = $1`, dead)
	require.NoError(t, err)
	_, err = schema.RegisterTarget(ctx, pool, schema.NewTarget{Name: "web-1", Mode: schema.ModePoll}, time.Minute)
	require.NoError(t, err)
	reqs, err := schema.EnqueueDispatchRequests(ctx, pool, []schema.NewDispatchRequest{
		{IdempotencyKey: "fresh", Target: "web-1", Command: "true", Priority: "normal"},
		{IdempotencyKey: "old", Target: "web-1", Command: "true", Priority: "normal"},
	})
	require.NoError(t, err)
	// The second request was created 21 h ago: it expires within the window.
	_, err = pool.Exec(ctx, `UPDATE pending_dispatch_requests SET created_at = now() - interval '21 hours',
		expires_at = now() + interval '3 hours' WHERE id = $1`, reqs[1].ID)
	require.NoError(t, err)

	require.Equal(t, map[string]float64{"live": 1, "draining": 0, "dead": 1}, gauges(t, reg, activities.ThoraxInstancesMetric))
	require.Equal(t, map[string]float64{"": 1}, gauges(t, reg, activities.RequestsNearExpiryMetric))
	require.Equal(t, 4*time.Hour, activities.NearExpiryWindow)
}
