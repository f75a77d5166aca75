package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/contract/api"
	"github.com/mantis-deploy/mantis/internal/mandible/httpapi"
	"github.com/mantis-deploy/mantis/internal/testrig/testenv"
)

// fuzzBodyLimit is the API's body cap in the fuzz targets: small, so that the cap is
// reached too.
const fuzzBodyLimit = 16 << 10

// fuzzAPI is one API handler on one migrated database, shared by every input of a
// fuzz target.
type fuzzAPI struct {
	h    http.Handler
	pool *pgxpool.Pool
}

// newFuzzAPI serves the API over a fresh database; opts may add to the options.
func newFuzzAPI(f *testing.F, opts func(*httpapi.Options)) fuzzAPI {
	f.Helper()
	pool := testenv.MigratedPool(f)
	o := httpapi.Options{DB: pool, Tokens: []string{token}, MaxBodyBytes: fuzzBodyLimit, HeartbeatTimeout: time.Hour}
	if opts != nil {
		opts(&o)
	}
	return fuzzAPI{h: httpapi.New(o), pool: pool}
}

// post sends body to path through the handler and returns the status, the error body
// when there is one, and the raw answer.
func (a fuzzAPI) post(t *testing.T, path string, body []byte) (int, api.ErrorBody, []byte) {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	a.h.ServeHTTP(rec, req)
	var eb api.ErrorBody
	if rec.Code >= 400 {
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &eb), "an error answer that is not the error body: %s", rec.Body)
	}
	return rec.Code, eb, rec.Body.Bytes()
}

// fingerprint digests every row of every table, so that a write shows as a change.
func (a fuzzAPI) fingerprint(t *testing.T) map[string]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rows, err := a.pool.Query(ctx, `SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY tablename`)
	require.NoError(t, err)
	var tables []string
	for rows.Next() {
		var name string
		require.NoError(t, rows.Scan(&name))
		tables = append(tables, name)
	}
	require.NoError(t, rows.Err())
	parts := make([]string, len(tables))
	for i, name := range tables {
		parts[i] = `SELECT '` + name + `', md5(coalesce(string_agg(x::text, '|' ORDER BY x::text), '')) FROM "` + name + `" x`
	}
	rows, err = a.pool.Query(ctx, strings.Join(parts, " UNION ALL "))
	require.NoError(t, err)
	out := map[string]string{}
	for rows.Next() {
		var name, sum string
		require.NoError(t, rows.Scan(&name, &sum))
		out[name] = sum
	}
	require.NoError(t, rows.Err())
	return out
}

// requireClearRefusal checks a refusal: a 4xx (never a 5xx, whatever the input) with
// an error code and message, and, for a bad argument, the fields at fault, each named.
func requireClearRefusal(t *testing.T, code int, eb api.ErrorBody, raw []byte) {
	t.Helper()
	require.True(t, code >= 400 && code < 500, "input answered %d: %s", code, raw)
	require.NotEmpty(t, eb.Error.Code, "a refusal without a code: %s", raw)
	require.NotEmpty(t, eb.Error.Message, "a refusal without a message: %s", raw)
	if eb.Error.Code == "invalid_argument" || eb.Error.Code == "invalid_spec" {
		require.NotEmpty(t, eb.Error.Fields, "a refusal of an argument naming no field: %s", raw)
		for _, f := range eb.Error.Fields {
			require.NotEmpty(t, f.Problem, "a field problem without text: %s", raw)
		}
	}
}

// FuzzRegisterTargetBody posts any body to POST /api/v1/targets: a refusal names its
// fields and writes nothing; an accepted target is stored as sent.
func FuzzRegisterTargetBody(f *testing.F) {
	for _, s := range []string{
		`{"name":"web-1","mode":"poll","labels":{"role":"web"}}`,
		`{"name":"db-1","mode":"listen","address":"10.0.0.5:7443"}`,
		`{"name":"","mode":"push"}`,
		`{"name":"bad name","mode":"listen","address":"nohost"}`,
		`{"name":"x","mode":"poll","labels":{"":"v"}}`,
		`{"name":"x","mode":"poll","labels":3}`,
		`{"name":"x","mode":"poll","extra":true}`,
		`{"name":"x\u0000y","mode":"poll"}`,
		`{"name":"x","mode":"poll"} {}`,
		`{`, ``, `null`, `[]`,
	} {
		f.Add([]byte(s))
	}
	api := newFuzzAPI(f, nil)
	f.Fuzz(func(t *testing.T, body []byte) {
		before := api.fingerprint(t)
		code, eb, raw := api.post(t, "/api/v1/targets", body)
		if code != http.StatusOK {
			requireClearRefusal(t, code, eb, raw)
			require.Equal(t, before, api.fingerprint(t), "a refused target wrote: %s", raw)
			return
		}
		var sent, got struct {
			Name string `json:"name"`
			Mode string `json:"mode"`
		}
		require.NoError(t, json.Unmarshal(body, &sent))
		require.NoError(t, json.Unmarshal(raw, &got))
		require.Equal(t, sent.Name, got.Name)
		require.Equal(t, sent.Mode, got.Mode)
		var n int
		require.NoError(t, api.pool.QueryRow(context.Background(),
			`SELECT count(*) FROM targets WHERE name = $1 AND mode = $2 AND deregistered_at IS NULL`, got.Name, got.Mode).Scan(&n))
		require.Equal(t, 1, n, "an accepted target is not stored")
	})
}

// FuzzEnqueueDispatchBody posts any body to POST /api/v1/dispatch-requests: a refusal
// names its fields and writes nothing; accepted requests are stored, each under its
// idempotency key.
func FuzzEnqueueDispatchBody(f *testing.F) {
	for _, s := range []string{
		`{"requests":[{"idempotency_key":"k1","target":"web-1","command":"uptime"}]}`,
		`{"requests":[{"idempotency_key":"k2","target":"web-1","command":"uptime","priority":"high","timeout":"90s"}]}`,
		`{"requests":[{"idempotency_key":"k","target":"web-1","command":"a"},{"idempotency_key":"k","target":"web-1","command":"b"}]}`,
		`{"requests":[{"idempotency_key":"","target":"","command":"","priority":"urgent","timeout":"-1s"}]}`,
		`{"requests":[{"idempotency_key":"k3","target":"web-1","command":"a\u0000b"}]}`,
		`{"requests":[{"idempotency_key":"k4","target":"web-1","command":"x","timeout":"1000000h"}]}`,
		`{"requests":[]}`, `{"requests":null}`, `{"requests":[1]}`, `{"requests":{}}`,
		`{"nope":1}`, `{`, ``,
	} {
		f.Add([]byte(s))
	}
	api := newFuzzAPI(f, nil)
	f.Fuzz(func(t *testing.T, body []byte) {
		before := api.fingerprint(t)
		code, eb, raw := api.post(t, "/api/v1/dispatch-requests", body)
		if code != http.StatusAccepted {
			requireClearRefusal(t, code, eb, raw)
			require.Equal(t, before, api.fingerprint(t), "a refused dispatch request wrote: %s", raw)
			return
		}
		var sent struct {
			Requests []struct {
				IdempotencyKey string `json:"idempotency_key"`
			} `json:"requests"`
		}
		require.NoError(t, json.Unmarshal(body, &sent))
		require.NotEmpty(t, sent.Requests)
		for _, r := range sent.Requests {
			var n int
			require.NoError(t, api.pool.QueryRow(context.Background(),
				`SELECT count(*) FROM pending_dispatch_requests WHERE idempotency_key = $1`, r.IdempotencyKey).Scan(&n))
			require.Equal(t, 1, n, "accepted request %q is not stored once", r.IdempotencyKey)
		}
	})
}
