package httpapi_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/mantis-deploy/mantis/internal/mandible/httpapi"
	"github.com/mantis-deploy/mantis/internal/testrig/testenv"
)

// A deployment whose selector resolves to more targets than a deployment may have is
// refused with 400, naming the field and the count, before anything is recorded.
func TestCreateDeploymentRefusesMoreThanMaxTargets(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := testenv.MigratedPool(t)
	_, err := pool.Exec(ctx, `INSERT INTO targets (name, mode, labels)
		SELECT 'web-' || i, 'poll', '{"role": "web"}'::jsonb FROM generate_series(1, 12345) AS i`)
	require.NoError(t, err)
	tsrv := testenv.TemporalServer(t)
	tc, err := client.NewLazyClient(client.Options{HostPort: tsrv.Address, Namespace: tsrv.Namespace})
	require.NoError(t, err)
	t.Cleanup(tc.Close)
	srv := httptest.NewServer(httpapi.New(httpapi.Options{DB: pool, Tokens: []string{token}, MaxBodyBytes: 4096, HeartbeatTimeout: time.Hour,
		Temporal: tc, Namespace: tsrv.Namespace, DeploymentQueue: tsrv.TaskQueue}))
	t.Cleanup(srv.Close)
	b := apiBundle{srv: srv}

	code, body := b.do(t, http.MethodPost, "/api/v1/deployments",
		`{"name":"big","target_selector":{"role":"web"},"steps":[{"name":"s","command":"true"}]}`, true)
	require.Equal(t, http.StatusBadRequest, code, "%v", body)
	require.Equal(t, "deployment resolves to 12345 targets; at most 10000", fields(t, body)["target_selector"])

	var n int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM deployments`).Scan(&n))
	require.Zero(t, n, "nothing is recorded")
	require.True(t, strings.Contains(body["error"].(map[string]any)["message"].(string), "12345"))
}
