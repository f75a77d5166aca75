package httpapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/mantis-deploy/mantis/internal/contract/api"
	"github.com/mantis-deploy/mantis/internal/mandible/apitoken"
	"github.com/mantis-deploy/mantis/internal/mandible/httpapi"
	"github.com/mantis-deploy/mantis/internal/testrig/testenv"
	"github.com/mantis-deploy/mantis/schema"
	"github.com/mantis-deploy/mantis/workflows"
)

// Secrets of the scoped tokens; the keyring holds only their hashes.
const (
	readSecret   = "read-secret-0123456789abcdef"
	deploySecret = "deploy-secret-0123456789abcdef"
	adminSecret  = "admin-secret-0123456789abcdef"
)

type scopedBundle struct {
	srv      *httptest.Server
	registry *prometheus.Registry
	pool     *pgxpool.Pool
	temporal client.Client
	queue    string
}

func setupScoped(t *testing.T) scopedBundle {
	t.Helper()
	pool := testenv.MigratedPool(t)
	tc := testenv.TemporalServer(t)
	temporal, err := client.Dial(client.Options{HostPort: tc.Address, Namespace: tc.Namespace})
	require.NoError(t, err)
	t.Cleanup(temporal.Close)
	keys := apitoken.NewKeyring([]apitoken.Token{
		{Name: "viewer", Scope: apitoken.ScopeRead, SHA256: apitoken.Hash(readSecret)},
		{Name: "ci", Scope: apitoken.ScopeDeploy, SHA256: apitoken.Hash(deploySecret)},
		{Name: "ops", Scope: apitoken.ScopeAdmin, SHA256: apitoken.Hash(adminSecret)},
	})
	events := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	registry := prometheus.NewRegistry()
	h := httpapi.New(httpapi.Options{DB: pool, Keyring: keys, HeartbeatTimeout: time.Hour, Events: events, Registry: registry,
		Temporal: temporal, Namespace: tc.Namespace, DeploymentQueue: tc.TaskQueue})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return scopedBundle{srv: srv, registry: registry, pool: pool, temporal: temporal, queue: tc.TaskQueue}
}

func (b scopedBundle) call(t *testing.T, secret, method, path, body string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, b.srv.URL+path, strings.NewReader(body))
	require.NoError(t, err)
	if secret != "" {
		req.Header.Set("Authorization", "Bearer "+secret)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var out map[string]any
	if resp.StatusCode != http.StatusNoContent && isJSON(resp.Header.Get("Content-Type")) {
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
	}
	return resp.StatusCode, out
}

func errorOf(body map[string]any) (code, message string) {
	e, _ := body["error"].(map[string]any)
	code, _ = e["code"].(string)
	message, _ = e["message"].(string)
	return code, message
}

func TestScopesRefuseWhatTheTokenMayNotDo(t *testing.T) {
	t.Parallel()
	b := setupScoped(t)
	const target = `{"name":"web-1","mode":"poll"}`

	// A wrong or missing token is unknown: 401, on the API and on the event streams.
	for _, path := range []string{"/api/v1/deployments", "/sse/events"} {
		for _, secret := range []string{"", "not-a-token-0123456789abcdef", apitoken.HashHex(adminSecret)} {
			code, _ := b.call(t, secret, http.MethodGet, path, "")
			require.Equal(t, http.StatusUnauthorized, code, "%s with %q", path, secret)
		}
	}

	// A known token whose scope does not cover the call: 403 naming both scopes.
	refusals := []struct {
		secret, method, path, body, needed, held, name string
	}{
		{readSecret, http.MethodPost, "/api/v1/dispatch-requests", `{"requests":[]}`, "deploy", "read", "viewer"},
		{readSecret, http.MethodPost, "/api/v1/deployments", `name: x`, "deploy", "read", "viewer"},
		{readSecret, http.MethodPost, "/api/v1/deployments/" + uuid.NewString() + "/cancel", ``, "deploy", "read", "viewer"},
		{readSecret, http.MethodPost, "/api/v1/targets", target, "admin", "read", "viewer"},
		{deploySecret, http.MethodPost, "/api/v1/targets", target, "admin", "deploy", "ci"},
		{deploySecret, http.MethodDelete, "/api/v1/targets/web-1", ``, "admin", "deploy", "ci"},
		{deploySecret, http.MethodGet, "/api/v1/dlq", ``, "admin", "deploy", "ci"},
		{deploySecret, http.MethodPost, "/api/v1/dlq/purge", `{"confirm":true}`, "admin", "deploy", "ci"},
	}
	for _, r := range refusals {
		code, body := b.call(t, r.secret, r.method, r.path, r.body)
		require.Equal(t, http.StatusForbidden, code, "%s %s as %s", r.method, r.path, r.held)
		errCode, message := errorOf(body)
		require.Equal(t, string(api.CodeForbidden), errCode)
		require.Contains(t, message, "needs scope "+r.needed)
		require.Contains(t, message, `token "`+r.name+`" holds scope `+r.held)
	}
	var count int
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT count(*) FROM targets`).Scan(&count))
	require.Zero(t, count, "a refused call wrote nothing")
	require.Equal(t, map[string]float64{"unauthenticated": 6, "forbidden": float64(len(refusals))}, refusalCounts(t, b.registry))

	// Each scope includes the ones below it.
	for _, secret := range []string{readSecret, deploySecret, adminSecret} {
		code, _ := b.call(t, secret, http.MethodGet, "/api/v1/targets", "")
		require.Equal(t, http.StatusOK, code)
		code, _ = b.call(t, secret, http.MethodGet, "/sse/events", "")
		require.Equal(t, http.StatusOK, code)
	}
	code, _ := b.call(t, adminSecret, http.MethodPost, "/api/v1/targets", target)
	require.Equal(t, http.StatusOK, code)
	code, _ = b.call(t, deploySecret, http.MethodPost, "/api/v1/dispatch-requests",
		`{"requests":[{"idempotency_key":"k1","target":"web-1","command":"true"}]}`)
	require.Equal(t, http.StatusAccepted, code)
	code, _ = b.call(t, adminSecret, http.MethodPost, "/api/v1/dispatch-requests",
		`{"requests":[{"idempotency_key":"k2","target":"web-1","command":"true"}]}`)
	require.Equal(t, http.StatusAccepted, code)
}

func TestWritesRecordTheTokenName(t *testing.T) {
	t.Parallel()
	b := setupScoped(t)
	ctx := context.Background()
	code, _ := b.call(t, adminSecret, http.MethodPost, "/api/v1/targets", `{"name":"web-1","mode":"poll"}`)
	require.Equal(t, http.StatusOK, code)

	code, created := b.call(t, deploySecret, http.MethodPost, "/api/v1/deployments",
		"name: release\ntargets: [web-1]\nsteps:\n  - name: one\n    command: 'true'\n")
	require.Equal(t, http.StatusAccepted, code, "%v", created)
	id := uuid.MustParse(created["id"].(string))

	// On the deployment, as the API shows it.
	code, got := b.call(t, readSecret, http.MethodGet, "/api/v1/deployments/"+id.String(), "")
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "ci", got["deployment"].(map[string]any)["created_by"])

	// In the workflow memo.
	desc, err := rawDescription(b.temporal.DescribeWorkflow(ctx, workflows.DeploymentWorkflowID(id.String()), ""))
	require.NoError(t, err)
	field := desc.GetWorkflowExecutionInfo().GetMemo().GetFields()[httpapi.MemoCreatedBy]
	require.NotNil(t, field, "the memo names the creator")
	var memo string
	require.NoError(t, converterValue(field.GetData(), &memo))
	require.Equal(t, "ci", memo)

	// In its events: deployment.started (written when the workflow starts it) and the
	// cancel request, which the admin token makes.
	require.NoError(t, schema.StartDeployment(ctx, b.pool, id, []schema.StepRecord{{Name: "one", Command: "true", Timeout: time.Minute}}, []string{"web-1"}))
	code, _ = b.call(t, adminSecret, http.MethodPost, "/api/v1/deployments/"+id.String()+"/cancel", "")
	require.Equal(t, http.StatusAccepted, code)
	actors := map[string]string{}
	rows, err := b.pool.Query(ctx, `SELECT type, coalesce(data->>'actor', '') FROM deployment_events WHERE deployment_id = $1`, id)
	require.NoError(t, err)
	for rows.Next() {
		var typ, who string
		require.NoError(t, rows.Scan(&typ, &who))
		actors[typ] = who
	}
	require.NoError(t, rows.Err())
	require.Equal(t, "ci", actors["deployment.started"])
	require.Equal(t, "ops", actors[schema.EventCancelRequested])
}

// refusalCounts reads mantis_http_refusals_total by reason.
func refusalCounts(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	families, err := reg.Gather()
	require.NoError(t, err)
	out := map[string]float64{}
	for _, f := range families {
		if f.GetName() != "mantis_http_refusals_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "reason" {
					out[l.GetValue()] = m.GetCounter().GetValue()
				}
			}
		}
	}
	return out
}

func converterValue(data []byte, v any) error { return json.Unmarshal(data, v) }

// isJSON reports whether contentType is JSON: an answer or a problem detail.
func isJSON(contentType string) bool {
	return strings.HasPrefix(contentType, "application/json") || strings.HasPrefix(contentType, api.ProblemContentType)
}
