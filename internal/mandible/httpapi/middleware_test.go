package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/trace"

	"github.com/mantis-deploy/mantis/internal/mandible/apitoken"
	"github.com/mantis-deploy/mantis/internal/mandible/httpapi"
)

// lockedBuffer is a log sink the server's goroutines may share.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// records are the JSON log records written so far.
func (b *lockedBuffer) records(t *testing.T) []map[string]any {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(b.buf.String()), "\n") {
		var rec map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &rec))
		out = append(out, rec)
	}
	return out
}

type middlewareBundle struct {
	srv      *httptest.Server
	registry *prometheus.Registry
	logs     *lockedBuffer
}

// setupMiddleware serves the API without a database: the routes it calls
// answer before they would need one (probes, refusals, the DLQ without a broker).
func setupMiddleware(t *testing.T) middlewareBundle {
	t.Helper()
	logs := &lockedBuffer{}
	logger := slog.New(httpapi.LogHandler(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	registry := prometheus.NewRegistry()
	keys := apitoken.NewKeyring([]apitoken.Token{{Name: "ops", Scope: apitoken.ScopeAdmin, SHA256: apitoken.Hash("ops-secret")}})
	h := httpapi.New(httpapi.Options{Logger: logger, Registry: registry, Keyring: keys})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return middlewareBundle{srv: srv, registry: registry, logs: logs}
}

func (b middlewareBundle) get(t *testing.T, path, token, requestID string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, b.srv.URL+path, nil)
	require.NoError(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if requestID != "" {
		req.Header.Set(httpapi.RequestIDHeader, requestID)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	return resp
}

// requestCounts are mantis_http_requests_total's values by "route method code".
func requestCounts(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	families, err := reg.Gather()
	require.NoError(t, err)
	out := map[string]float64{}
	for _, f := range families {
		if f.GetName() != httpapi.RequestsMetric {
			continue
		}
		for _, m := range f.GetMetric() {
			l := map[string]string{}
			for _, p := range m.GetLabel() {
				l[p.GetName()] = p.GetValue()
			}
			out[l["route"]+" "+l["method"]+" "+l["code"]] = m.GetCounter().GetValue()
		}
	}
	return out
}

func TestRequestsAreCountedByRoutePatternMethodAndStatusClass(t *testing.T) {
	t.Parallel()
	b := setupMiddleware(t)
	b.get(t, "/healthz", "", "")
	b.get(t, "/api/v1/targets", "", "")               // 401: no token
	b.get(t, "/api/v1/deployments/abc", "", "")       // 401, the pattern and not the id
	b.get(t, "/api/v1/deployments/def", "", "")       // the same series
	resp := b.get(t, "/api/v1/dlq", "ops-secret", "") // 503: no broker
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	b.get(t, "/nowhere", "", "")

	require.Equal(t, map[string]float64{
		"/healthz GET 2xx":                 1,
		"/api/v1/targets GET 4xx":          1,
		"/api/v1/deployments/{id} GET 4xx": 2,
		"/api/v1/dlq GET 5xx":              1,
		"unmatched GET 4xx":                1,
	}, requestCounts(t, b.registry))
	families, err := b.registry.Gather()
	require.NoError(t, err)
	var timed uint64
	for _, f := range families {
		if f.GetName() == httpapi.RequestDurationMetric {
			for _, m := range f.GetMetric() {
				timed += m.GetHistogram().GetSampleCount()
			}
		}
	}
	require.Equal(t, uint64(6), timed)
}

func TestEveryRequestHasAnIDInItsAnswerAndItsLogLines(t *testing.T) {
	t.Parallel()
	b := setupMiddleware(t)
	resp := b.get(t, "/api/v1/dlq", "ops-secret", "given-id-1")
	require.Equal(t, "given-id-1", resp.Header.Get(httpapi.RequestIDHeader))
	generated := b.get(t, "/api/v1/targets", "", "bad id with spaces").Header.Get(httpapi.RequestIDHeader)
	require.Len(t, generated, 32, "an unusable id is replaced by a generated one")

	var access []map[string]any
	refusalLogged := false
	for _, rec := range b.logs.records(t) {
		switch rec["msg"] {
		case "http request":
			access = append(access, rec)
		case "api call refused":
			require.Equal(t, generated, rec["http_request_id"], "a handler's own log line carries the request id")
			refusalLogged = true
		}
	}
	require.True(t, refusalLogged)
	require.Len(t, access, 2)
	require.Equal(t, "given-id-1", access[0]["http_request_id"])
	require.Equal(t, "/api/v1/dlq", access[0]["route"])
	require.Equal(t, "GET", access[0]["method"])
	require.EqualValues(t, http.StatusServiceUnavailable, access[0]["status"])
	require.Equal(t, "ops", access[0]["actor"], "the access log names the token")
	require.Greater(t, access[0]["bytes"], float64(0))
	require.Contains(t, access[0], "duration")
	require.Equal(t, generated, access[1]["http_request_id"])
	require.Equal(t, "", access[1]["actor"])
}

func TestLogLinesOfATracedSpanCarryItsTraceID(t *testing.T) {
	t.Parallel()
	logs := &lockedBuffer{}
	logger := slog.New(httpapi.LogHandler(slog.NewJSONHandler(logs, nil)))
	traceID := trace.TraceID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	ctx := trace.ContextWithSpanContext(httpapi.WithRequestID(context.Background(), "r-1"),
		trace.NewSpanContext(trace.SpanContextConfig{TraceID: traceID, SpanID: trace.SpanID{1}}))
	logger.InfoContext(ctx, "traced")
	logger.InfoContext(context.Background(), "untraced")
	recs := logs.records(t)
	require.Equal(t, traceID.String(), recs[0]["trace_id"])
	require.Equal(t, "r-1", recs[0]["http_request_id"])
	require.NotContains(t, recs[1], "trace_id")
	require.NotContains(t, recs[1], "http_request_id")
}
