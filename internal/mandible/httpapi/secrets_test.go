package httpapi_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/mantis-deploy/mantis/internal/mandible/httpapi"
	"github.com/mantis-deploy/mantis/internal/secretenv"
	"github.com/mantis-deploy/mantis/internal/testrig/testenv"
)

const secretSpec = `{"name":"with-secret","targets":["web-1"],"steps":[{"name":"s","command":"true",
	"env":{"PLAIN":"visible"},"env_secret":{"TOKEN":"s3cret-value"}}]}`

// secretSetup serves the API on PostgreSQL and Temporal, with secrets sealed by k
// (none when nil).
func secretSetup(t *testing.T, k secretenv.Keyring) (apiBundle, *pgxpool.Pool, testenv.Temporal) {
	t.Helper()
	pool := testenv.MigratedPool(t)
	_, err := pool.Exec(context.Background(), `INSERT INTO targets (name, mode) VALUES ('web-1', 'poll')`)
	require.NoError(t, err)
	tsrv := testenv.TemporalServer(t)
	tc, err := client.NewLazyClient(client.Options{HostPort: tsrv.Address, Namespace: tsrv.Namespace})
	require.NoError(t, err)
	t.Cleanup(tc.Close)
	srv := httptest.NewServer(httpapi.New(httpapi.Options{DB: pool, Tokens: []string{token}, MaxBodyBytes: 4096, HeartbeatTimeout: time.Hour,
		Temporal: tc, Namespace: tsrv.Namespace, DeploymentQueue: tsrv.TaskQueue, Secrets: k}))
	t.Cleanup(srv.Close)
	return apiBundle{srv: srv}, pool, tsrv
}

// Without the codec keyring, a spec with env_secret is refused naming the field, and
// nothing is recorded.
func TestCreateDeploymentWithSecretEnvNeedsTheCodecKeyring(t *testing.T) {
	t.Parallel()
	b, pool, _ := secretSetup(t, nil)
	code, body := b.do(t, http.MethodPost, "/api/v1/deployments", secretSpec, true)
	require.Equal(t, http.StatusBadRequest, code, "%v", body)
	require.Contains(t, fields(t, body)["steps[0].env_secret"], "codec keyring")
	var n int
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT count(*) FROM deployments`).Scan(&n))
	require.Zero(t, n)
}

// With the keyring, the stored spec and the workflow's input hold the secret sealed,
// the deployment view shows <secret>, and a sealed value sent in is refused.
func TestCreateDeploymentSealsSecretEnvAndTheViewRedactsIt(t *testing.T) {
	t.Parallel()
	c := newTestCodec(t)
	b, pool, tsrv := secretSetup(t, c)
	ctx := context.Background()

	code, body := b.do(t, http.MethodPost, "/api/v1/deployments", secretSpec, true)
	require.Equal(t, http.StatusAccepted, code, "%v", body)
	id := body["id"].(string)

	var stored string
	require.NoError(t, pool.QueryRow(ctx, `SELECT spec::text FROM deployments WHERE id = $1`, id).Scan(&stored))
	require.NotContains(t, stored, "s3cret-value")
	require.Contains(t, stored, secretenv.Prefix+"k1:")

	req, err := http.NewRequest(http.MethodGet, b.srv.URL+"/api/v1/deployments/"+id, nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	view, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(view))
	require.Contains(t, string(view), `"TOKEN":"\u003csecret\u003e"`)
	require.Contains(t, string(view), `"PLAIN":"visible"`)
	require.NotContains(t, string(view), secretenv.Prefix, "not even the sealed form is shown")

	// The workflow's input, as the history holds it (this client has no codec).
	tc, err := client.Dial(client.Options{HostPort: tsrv.Address, Namespace: tsrv.Namespace})
	require.NoError(t, err)
	defer tc.Close()
	iter := tc.GetWorkflowHistory(ctx, "deployment:"+id, "", false, 0)
	require.True(t, iter.HasNext())
	first, err := iter.Next()
	require.NoError(t, err)
	input := first.GetWorkflowExecutionStartedEventAttributes().GetInput().GetPayloads()
	require.Len(t, input, 1)
	require.NotContains(t, string(input[0].GetData()), "s3cret-value")
	require.Contains(t, string(input[0].GetData()), secretenv.Prefix+"k1:")
	require.NoError(t, tc.TerminateWorkflow(ctx, "deployment:"+id, "", "test over"))

	code, body = b.do(t, http.MethodPost, "/api/v1/deployments",
		strings.Replace(secretSpec, "s3cret-value", secretenv.Prefix+"k1:AAAA", 1), true)
	require.Equal(t, http.StatusBadRequest, code, "%v", body)
	require.Contains(t, fields(t, body)["steps[0].env_secret.TOKEN"], "not a sealed value")
}
