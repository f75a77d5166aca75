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
	"go.opentelemetry.io/otel/trace"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/mantis-deploy/mantis/internal/config"
	"github.com/mantis-deploy/mantis/internal/telemetry"
)

func TestTraceParentRoundTrips(t *testing.T) {
	tp := "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	ctx := telemetry.WithTraceParent(context.Background(), tp)
	sc := trace.SpanContextFromContext(ctx)
	require.True(t, sc.IsRemote())
	require.Equal(t, "0af7651916cd43dd8448eb211c80319c", sc.TraceID().String())
	require.Equal(t, tp, telemetry.TraceParent(ctx))

	require.Empty(t, telemetry.TraceParent(context.Background()))
	require.Equal(t, context.Background(), telemetry.WithTraceParent(context.Background(), ""))
	require.False(t, trace.SpanContextFromContext(telemetry.WithTraceParent(context.Background(), "garbage")).IsValid())
}

// Setup with an endpoint exports the process's spans under its service name, and
// Shutdown flushes what the batcher still holds.
func TestSetupExportsAndShutdownFlushes(t *testing.T) {
	keepGlobals(t)
	var exported atomic.Int32
	var service atomic.Value
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
			for _, kv := range rs.GetResource().GetAttributes() {
				if kv.GetKey() == "service.name" {
					service.Store(kv.GetValue().GetStringValue())
				}
			}
			for _, ss := range rs.GetScopeSpans() {
				exported.Add(int32(len(ss.GetSpans())))
			}
		}
	}))
	defer srv.Close()

	ctx := context.Background()
	shutdown, err := telemetry.Setup(ctx, config.Tracing{Endpoint: srv.URL + "/v1/traces"}, telemetry.ServiceThorax, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	_, span := telemetry.Tracer().Start(ctx, "unit")
	require.True(t, span.SpanContext().IsSampled(), "sample_ratio defaults to 1")
	span.End()
	require.Zero(t, exported.Load(), "the batcher holds the span until its timeout or a flush")
	require.NoError(t, shutdown(ctx))
	require.EqualValues(t, 1, exported.Load())
	require.Equal(t, telemetry.ServiceThorax, service.Load())
}

func TestSetupRefusesABadSection(t *testing.T) {
	keepGlobals(t)
	_, err := telemetry.Setup(context.Background(), config.Tracing{Endpoint: "http://c:4318", SampleRatio: "1.5"}, telemetry.ServiceAgent, slog.New(slog.DiscardHandler))
	require.ErrorContains(t, err, "tracing.sample_ratio")
}
