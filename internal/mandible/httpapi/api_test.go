package httpapi_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/mandible/httpapi"
	"github.com/mantis-deploy/mantis/internal/testrig/testenv"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

const token = "test-token-0123456789abcdef"

type apiBundle struct {
	srv *httptest.Server
}

func setup(t *testing.T) apiBundle {
	t.Helper()
	pool := testenv.MigratedPool(t)
	h := httpapi.New(httpapi.Options{DB: pool, Tokens: []string{token}, MaxBodyBytes: 4096, HeartbeatTimeout: time.Hour})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return apiBundle{srv: srv}
}

func (b apiBundle) do(t *testing.T, method, path, body string, auth bool) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, b.srv.URL+path, strings.NewReader(body))
	require.NoError(t, err)
	if auth {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var out map[string]any
	if resp.StatusCode != http.StatusNoContent {
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
	}
	return resp.StatusCode, out
}

func fields(t *testing.T, body map[string]any) map[string]string {
	t.Helper()
	out := map[string]string{}
	e, _ := body["error"].(map[string]any)
	fs, _ := e["fields"].([]any)
	for _, f := range fs {
		m := f.(map[string]any)
		out[m["field"].(string)] = m["problem"].(string)
	}
	return out
}

func TestAPIRequiresToken(t *testing.T) {
	t.Parallel()
	b := setup(t)
	code, body := b.do(t, http.MethodGet, "/api/v1/targets", "", false)
	require.Equal(t, http.StatusUnauthorized, code)
	require.Equal(t, "unauthenticated", body["error"].(map[string]any)["code"])
	req, _ := http.NewRequest(http.MethodGet, b.srv.URL+"/api/v1/targets", nil)
	req.Header.Set("Authorization", "Bearer wrong-token")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)

	code, _ = b.do(t, http.MethodGet, "/healthz", "", false)
	require.Equal(t, http.StatusOK, code, "health probes need no token")
}

func TestTargetsRegisterListDeregister(t *testing.T) {
	t.Parallel()
	b := setup(t)
	code, body := b.do(t, http.MethodPost, "/api/v1/targets", `{"name":"web-1","mode":"poll","labels":{"role":"web"}}`, true)
	require.Equal(t, http.StatusOK, code, body)
	require.Equal(t, "web-1", body["name"])

	code, body = b.do(t, http.MethodPost, "/api/v1/targets", `{"name":"db 1","mode":"listen"}`, true)
	require.Equal(t, http.StatusBadRequest, code)
	f := fields(t, body)
	require.Contains(t, f, "name")
	require.Equal(t, "required for listen-mode targets", f["address"])

	code, body = b.do(t, http.MethodGet, "/api/v1/targets", "", true)
	require.Equal(t, http.StatusOK, code)
	require.Len(t, body["targets"], 1)

	code, _ = b.do(t, http.MethodDelete, "/api/v1/targets/web-1", "", true)
	require.Equal(t, http.StatusNoContent, code)
	code, _ = b.do(t, http.MethodDelete, "/api/v1/targets/web-1", "", true)
	require.Equal(t, http.StatusNotFound, code)
}

func TestEnqueueAndListDispatchRequests(t *testing.T) {
	t.Parallel()
	b := setup(t)
	code, _ := b.do(t, http.MethodPost, "/api/v1/targets", `{"name":"web-1","mode":"poll"}`, true)
	require.Equal(t, http.StatusOK, code)

	code, body := b.do(t, http.MethodPost, "/api/v1/dispatch-requests",
		`{"requests":[{"idempotency_key":"a","target":"web-1","command":"uptime","priority":"high"},
		              {"idempotency_key":"b","target":"web-1","command":"df -h","timeout":"30s"}]}`, true)
	require.Equal(t, http.StatusAccepted, code, body)
	require.Len(t, body["requests"], 2)

	code, body = b.do(t, http.MethodGet, "/api/v1/dispatch-requests?status=pending", "", true)
	require.Equal(t, http.StatusOK, code, body)
	reqs := body["requests"].([]any)
	require.Len(t, reqs, 2)
	first := reqs[0].(map[string]any)
	require.Equal(t, "pending", first["status"])
	require.Contains(t, first["reason"], "no live Thorax for target web-1", "a poll target nobody serves says so")
	require.EqualValues(t, 11, first["max_attempts"], "a first delivery and 10 retries")

	code, body = b.do(t, http.MethodGet, "/api/v1/dispatch-requests?status=dispatched", "", true)
	require.Equal(t, http.StatusOK, code)
	require.Empty(t, body["requests"])
}

func TestEnqueueNamesEveryBadField(t *testing.T) {
	t.Parallel()
	b := setup(t)
	code, body := b.do(t, http.MethodPost, "/api/v1/dispatch-requests",
		`{"requests":[{"idempotency_key":"a","target":"ghost","command":"","priority":"urgent","timeout":"soon"}]}`, true)
	require.Equal(t, http.StatusBadRequest, code)
	f := fields(t, body)
	require.Contains(t, f, "requests[0].timeout")

	code, body = b.do(t, http.MethodPost, "/api/v1/dispatch-requests",
		`{"requests":[{"idempotency_key":"a","target":"ghost","command":"","priority":"urgent"}]}`, true)
	require.Equal(t, http.StatusBadRequest, code)
	f = fields(t, body)
	require.Equal(t, "must not be empty", f["requests[0].command"])
	require.Contains(t, f["requests[0].priority"], "must be high, normal or low")

	code, body = b.do(t, http.MethodPost, "/api/v1/dispatch-requests",
		`{"requests":[{"idempotency_key":"a","target":"ghost","command":"true"}]}`, true)
	require.Equal(t, http.StatusBadRequest, code)
	require.Equal(t, `unknown target "ghost"`, fields(t, body)["requests[0].target"])

	code, body = b.do(t, http.MethodPost, "/api/v1/dispatch-requests", `{"requests":[{"bogus":1}]}`, true)
	require.Equal(t, http.StatusBadRequest, code)
	require.Equal(t, "unknown field", fields(t, body)["bogus"])

	code, _ = b.do(t, http.MethodPost, "/api/v1/dispatch-requests", `{"requests":`, true)
	require.Equal(t, http.StatusBadRequest, code)

	big := `{"requests":[{"command":"` + strings.Repeat("x", 5000) + `"}]}`
	code, body = b.do(t, http.MethodPost, "/api/v1/dispatch-requests", big, true)
	require.Equal(t, http.StatusRequestEntityTooLarge, code, body)

	code, body = b.do(t, http.MethodGet, "/api/v1/dispatch-requests?status=lost&limit=0", "", true)
	require.Equal(t, http.StatusBadRequest, code)
	f = fields(t, body)
	require.Contains(t, f, "status")
	require.Contains(t, f, "limit")
}
