package httpapi_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/mantis-deploy/mantis/internal/mandible/apitoken"
	"github.com/mantis-deploy/mantis/internal/mandible/httpapi"
	"github.com/mantis-deploy/mantis/internal/testrig/testenv"
)

// Tokens of the fleet tests, one per scope; the admin token is named "ops".
const (
	fleetRead   = "fleet-read-0123456789abcdef"
	fleetDeploy = "fleet-deploy-0123456789abcdef"
	fleetAdmin  = "fleet-admin-0123456789abcdef"
)

// countingTemporal counts the workflows started through it.
type countingTemporal struct {
	client.Client
	started atomic.Int64
}

func (c *countingTemporal) ExecuteWorkflow(ctx context.Context, o client.StartWorkflowOptions, wf any, args ...any) (client.WorkflowRun, error) {
	c.started.Add(1)
	return c.Client.ExecuteWorkflow(ctx, o, wf, args...)
}

// fleetBundle is the HTTP API on real PostgreSQL and Temporal, with a token per scope.
type fleetBundle struct {
	srv      *httptest.Server
	pool     *pgxpool.Pool
	temporal *countingTemporal
	tsrv     testenv.Temporal
}

func setupFleet(t *testing.T) *fleetBundle {
	t.Helper()
	pool := testenv.MigratedPool(t)
	tsrv := testenv.TemporalServer(t)
	tc, err := client.NewLazyClient(client.Options{HostPort: tsrv.Address, Namespace: tsrv.Namespace})
	require.NoError(t, err)
	t.Cleanup(tc.Close)
	counting := &countingTemporal{Client: tc}
	keys := apitoken.NewKeyring([]apitoken.Token{
		{Name: "viewer", Scope: apitoken.ScopeRead, SHA256: apitoken.Hash(fleetRead)},
		{Name: "ci", Scope: apitoken.ScopeDeploy, SHA256: apitoken.Hash(fleetDeploy)},
		{Name: "ops", Scope: apitoken.ScopeAdmin, SHA256: apitoken.Hash(fleetAdmin)},
	})
	srv := httptest.NewServer(httpapi.New(httpapi.Options{DB: pool, Keyring: keys, MaxBodyBytes: 8192, HeartbeatTimeout: time.Minute,
		Temporal: counting, Namespace: tsrv.Namespace, DeploymentQueue: tsrv.TaskQueue}))
	t.Cleanup(srv.Close)
	return &fleetBundle{srv: srv, pool: pool, temporal: counting, tsrv: tsrv}
}

// call makes one request with token and decodes the JSON answer into out (when
// not nil), returning the status.
func (b *fleetBundle) call(t *testing.T, method, path, token, body string, out any) int {
	t.Helper()
	req, err := http.NewRequest(method, b.srv.URL+path, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	if out != nil && len(raw) > 0 {
		require.NoError(t, json.Unmarshal(raw, out), "%s", raw)
	}
	return resp.StatusCode
}

// count returns the rows of table.
func (b *fleetBundle) count(t *testing.T, table string) int {
	t.Helper()
	var n int
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT count(*) FROM `+table).Scan(&n))
	return n
}

// registerTargets registers poll targets with labels.
func (b *fleetBundle) registerTargets(t *testing.T, targets map[string]string) {
	t.Helper()
	for name, env := range targets {
		body := `{"name":"` + name + `","mode":"poll","labels":{"env":"` + env + `"}}`
		require.Equal(t, http.StatusOK, b.call(t, "POST", "/api/v1/targets", fleetAdmin, body, nil))
	}
}
