package telemetry_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/mantis-deploy/mantis/internal/config"
	"github.com/mantis-deploy/mantis/internal/telemetry"
)

// Trace parents as a nudge or a command row carries them: the same trace, once
// sampled by the process that started it and once not.
const (
	sampledParent   = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	unsampledParent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"
)

// With sample_ratio 0 a process starts no trace of its own, but it keeps the
// spans of a trace its caller sampled (the sampler is parent-based), so a
// deployment is recorded whole or not at all.
func TestSamplingIsParentBasedRatio(t *testing.T) {
	keepGlobals(t)
	var exported atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, err := io.ReadAll(r.Body)
		var req collectortrace.ExportTraceServiceRequest
		if err == nil {
			err = proto.Unmarshal(raw, &req)
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		for _, rs := range req.GetResourceSpans() {
			for _, ss := range rs.GetScopeSpans() {
				exported.Add(int32(len(ss.GetSpans())))
			}
		}
	}))
	defer srv.Close()

	ctx := context.Background()
	cfg := config.Tracing{Endpoint: srv.URL + "/v1/traces", SampleRatio: "0"}
	shutdown, err := telemetry.Setup(ctx, cfg, telemetry.ServiceMandible, slog.New(slog.DiscardHandler))
	require.NoError(t, err)

	_, root := telemetry.Tracer().Start(ctx, "root")
	require.False(t, root.SpanContext().IsSampled(), "ratio 0: a new trace is not sampled")
	root.End()

	_, kept := telemetry.Tracer().Start(telemetry.WithTraceParent(ctx, sampledParent), "from a sampled parent")
	require.True(t, kept.SpanContext().IsSampled(), "a sampled remote parent is followed")
	require.Equal(t, "4bf92f3577b34da6a3ce929d0e0e4736", kept.SpanContext().TraceID().String())
	kept.End()

	_, dropped := telemetry.Tracer().Start(telemetry.WithTraceParent(ctx, unsampledParent), "from an unsampled parent")
	require.False(t, dropped.SpanContext().IsSampled(), "an unsampled remote parent is followed too")
	dropped.End()

	require.NoError(t, shutdown(ctx))
	require.EqualValues(t, 1, exported.Load(), "only the span of the sampled parent is exported")
}
