package console_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/mandible/console"
	"github.com/mantis-deploy/mantis/internal/mandible/httpapi"
)

// brokenWriter is an answer whose body cannot be written, as when the browser
// has gone away.
type brokenWriter struct{ *httptest.ResponseRecorder }

func (brokenWriter) Write([]byte) (int, error) { return 0, errors.New("connection reset") }

// A page that cannot be written is logged with the request's context, so the
// line carries the request's id like every other line of that request.
func TestRenderFailureIsLoggedWithTheRequestID(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	logger := slog.New(httpapi.LogHandler(slog.NewJSONHandler(&logs, nil)))
	h := console.New(console.Options{Logger: logger})
	req := httptest.NewRequest(http.MethodGet, console.Prefix+"/nowhere", nil)
	req = req.WithContext(httpapi.WithRequestID(req.Context(), "req-render-1"))

	h.ServeHTTP(brokenWriter{httptest.NewRecorder()}, req)

	var rec map[string]any
	require.NoError(t, json.Unmarshal(logs.Bytes(), &rec), logs.String())
	require.Equal(t, "rendering console page failed", rec["msg"])
	require.Equal(t, "notfound", rec["page"])
	require.NotEmpty(t, rec["err"])
	require.Equal(t, "req-render-1", rec["http_request_id"])
}
