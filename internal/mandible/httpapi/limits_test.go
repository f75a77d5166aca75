package httpapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/domain"
	"github.com/mantis-deploy/mantis/internal/mandible/apitoken"
	"github.com/mantis-deploy/mantis/internal/mandible/httpapi"
	"github.com/mantis-deploy/mantis/internal/testrig/testenv"
	"github.com/mantis-deploy/mantis/schema"
)

const (
	limitsRead   = "limits-read-0123456789abcdef"
	limitsDeploy = "limits-deploy-0123456789abcdef"
	limitsAdmin  = "limits-admin-0123456789abcdef"
)

type limitsBundle struct {
	srv  *httptest.Server
	pool *pgxpool.Pool
}

func setupLimits(t *testing.T) limitsBundle {
	t.Helper()
	pool := testenv.MigratedPool(t)
	keys := apitoken.NewKeyring([]apitoken.Token{
		{Name: "viewer", Scope: apitoken.ScopeRead, SHA256: apitoken.Hash(limitsRead)},
		{Name: "ci", Scope: apitoken.ScopeDeploy, SHA256: apitoken.Hash(limitsDeploy)},
		{Name: "ops", Scope: apitoken.ScopeAdmin, SHA256: apitoken.Hash(limitsAdmin)},
	})
	srv := httptest.NewServer(httpapi.New(httpapi.Options{DB: pool, Keyring: keys, HeartbeatTimeout: time.Hour}))
	t.Cleanup(srv.Close)
	return limitsBundle{srv: srv, pool: pool}
}

func (b limitsBundle) call(t *testing.T, secret, method, path, body string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, b.srv.URL+path, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+secret)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var out map[string]any
	if resp.StatusCode != http.StatusNoContent {
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
	}
	return resp.StatusCode, out
}

func TestLimitsAreManagedByAdminsAndReadByReaders(t *testing.T) {
	t.Parallel()
	b := setupLimits(t)
	const prod = `{"name":"prod-two","scope":"label","label":"env","value":"prod","max_running":2}`
	for _, secret := range []string{limitsRead, limitsDeploy} {
		code, _ := b.call(t, secret, http.MethodPost, "/api/v1/limits", prod)
		require.Equal(t, http.StatusForbidden, code, "writing a limit needs admin")
		code, _ = b.call(t, secret, http.MethodDelete, "/api/v1/limits/target-default", "")
		require.Equal(t, http.StatusForbidden, code)
	}
	code, body := b.call(t, limitsAdmin, http.MethodPost, "/api/v1/limits", prod)
	require.Equal(t, http.StatusOK, code, "%v", body)
	require.Equal(t, "prod-two", body["name"])
	require.Equal(t, "ops", body["created_by"], "the write records the token's name")

	code, body = b.call(t, limitsRead, http.MethodGet, "/api/v1/limits", "")
	require.Equal(t, http.StatusOK, code)
	var names []string
	for _, l := range body["limits"].([]any) {
		names = append(names, l.(map[string]any)["name"].(string))
	}
	require.Equal(t, []string{"prod-two", domain.DefaultTargetLimit}, names)
	code, body = b.call(t, limitsRead, http.MethodGet, "/api/v1/limits/target-default", "")
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, float64(1), body["max_running"], "one command at a time per target by default")

	code, _ = b.call(t, limitsAdmin, http.MethodDelete, "/api/v1/limits/prod-two", "")
	require.Equal(t, http.StatusNoContent, code)
	code, _ = b.call(t, limitsRead, http.MethodGet, "/api/v1/limits/prod-two", "")
	require.Equal(t, http.StatusNotFound, code)
	code, body = b.call(t, limitsAdmin, http.MethodDelete, "/api/v1/limits/target-default", "")
	require.Equal(t, http.StatusBadRequest, code)
	require.Contains(t, fields(t, body)["name"], "may be changed")
}

// Each refusal names the field at fault.
func TestLimitValidationNamesTheField(t *testing.T) {
	t.Parallel()
	b := setupLimits(t)
	cases := map[string]struct{ body, field string }{
		"bad name":         {`{"name":"no spaces","scope":"label","label":"env","value":"prod","max_running":2}`, "name"},
		"unknown scope":    {`{"name":"x","scope":"region","label":"env","value":"prod","max_running":2}`, "scope"},
		"label no label":   {`{"name":"x","scope":"label","value":"prod","max_running":2}`, "label"},
		"label no value":   {`{"name":"x","scope":"label","label":"env","max_running":2}`, "value"},
		"target label":     {`{"name":"x","scope":"target","label":"env","max_running":2}`, "label"},
		"zero max":         {`{"name":"x","scope":"target","value":"web-1","max_running":0}`, "max_running"},
		"huge max":         {`{"name":"x","scope":"target","value":"web-1","max_running":1000001}`, "max_running"},
		"second default":   {`{"name":"x","scope":"target","max_running":3}`, "scope"},
		"default as label": {`{"name":"target-default","scope":"label","label":"env","value":"prod","max_running":3}`, "scope"},
	}
	for name, c := range cases {
		code, body := b.call(t, limitsAdmin, http.MethodPost, "/api/v1/limits", c.body)
		require.Equal(t, http.StatusBadRequest, code, name)
		require.Contains(t, fields(t, body), c.field, "%s: %v", name, body)
	}
	code, body := b.call(t, limitsAdmin, http.MethodPost, "/api/v1/limits", `{"name":"x","scope":"target","max_running":3}`)
	require.Equal(t, http.StatusBadRequest, code)
	require.Contains(t, fields(t, body)["scope"], "limit target-default already covers", "a conflict names the limit that covers it")
	code, _ = b.call(t, limitsAdmin, http.MethodPost, "/api/v1/limits", `{"name":"x","scope":"target","max_running":3,"bogus":1}`)
	require.Equal(t, http.StatusBadRequest, code, "unknown fields are refused")
	code, _ = b.call(t, limitsAdmin, http.MethodPost, "/api/v1/limits", `{"name":"`+strings.Repeat("x", 5000)+`"}`)
	require.Equal(t, http.StatusRequestEntityTooLarge, code, "the body is bounded")
}

// A request held back by a limit shows the limit's name in the one-request view
// and in the list.
func TestHeldDispatchRequestShowsHeldBy(t *testing.T) {
	t.Parallel()
	b := setupLimits(t)
	ctx := context.Background()
	code, body := b.call(t, limitsAdmin, http.MethodPost, "/api/v1/targets", `{"name":"web-1","mode":"poll"}`)
	require.Equal(t, http.StatusOK, code, "%v", body)
	code, body = b.call(t, limitsDeploy, http.MethodPost, "/api/v1/dispatch-requests",
		`{"requests":[{"idempotency_key":"a","target":"web-1","command":"true"},{"idempotency_key":"b","target":"web-1","command":"true"}]}`)
	require.Equal(t, http.StatusAccepted, code, "%v", body)
	reqs := body["requests"].([]any)
	first, second := reqs[0].(map[string]any)["id"].(string), reqs[1].(map[string]any)["id"].(string)

	claim, err := schema.ClaimPending(ctx, b.pool, "r1", 10)
	require.NoError(t, err)
	require.Len(t, claim.Claimed, 1)
	require.Equal(t, first, claim.Claimed[0].ID.String())

	code, body = b.call(t, limitsRead, http.MethodGet, "/api/v1/dispatch-requests/"+second, "")
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, domain.DefaultTargetLimit, body["held_by"])
	require.Equal(t, "pending", body["status"])
	code, body = b.call(t, limitsRead, http.MethodGet, "/api/v1/dispatch-requests/"+first, "")
	require.Equal(t, http.StatusOK, code)
	require.NotContains(t, body, "held_by")

	code, body = b.call(t, limitsRead, http.MethodGet, "/api/v1/dispatch-requests?status=pending", "")
	require.Equal(t, http.StatusOK, code)
	list := body["requests"].([]any)
	require.Len(t, list, 1)
	require.Equal(t, domain.DefaultTargetLimit, list[0].(map[string]any)["held_by"])

	code, _ = b.call(t, limitsRead, http.MethodGet, "/api/v1/dispatch-requests/not-a-uuid", "")
	require.Equal(t, http.StatusBadRequest, code)
	code, _ = b.call(t, limitsRead, http.MethodGet, "/api/v1/dispatch-requests/00000000-0000-0000-0000-000000000001", "")
	require.Equal(t, http.StatusNotFound, code)
}
