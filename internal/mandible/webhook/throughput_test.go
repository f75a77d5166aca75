package webhook_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/contract/events"
	"github.com/mantis-deploy/mantis/internal/mandible/webhook"
	"github.com/mantis-deploy/mantis/internal/testrig/testenv"
)

// BenchmarkDeliveries measures how fast the worker fans out and sends b.N events to
// a local receiver, one replica (go test -bench Deliveries -benchtime 2000x).
func BenchmarkDeliveries(b *testing.B) {
	pool := testenv.MigratedPool(b)
	var got atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { got.Add(1) }))
	b.Cleanup(srv.Close)
	ctx := context.Background()
	addWebhook(b, pool, srv.URL, "deployment.*")
	_, err := pool.Exec(ctx, `INSERT INTO deployment_events (type, data) SELECT $1, '{"n":1}' FROM generate_series(1, $2)`,
		string(events.DeploymentStarted), b.N)
	require.NoError(b, err)
	w := &webhook.Worker{DB: pool, Interval: 10 * time.Millisecond}
	b.ResetTimer()
	start := time.Now()
	require.NoError(b, w.Round(ctx))
	require.Equal(b, int64(b.N), got.Load())
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "deliveries/s")
}
