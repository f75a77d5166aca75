package httpapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/contract/api"
)

// createWithKey posts spec to /api/v1/deployments with the Idempotency-Key header
// key (none when empty) and returns the status and the body.
func (b apiBundle) createWithKey(t *testing.T, key, contentType, spec string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, b.srv.URL+"/api/v1/deployments", strings.NewReader(spec))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", contentType)
	if key != "" {
		req.Header.Set(api.IdempotencyKeyHeader, key)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var out map[string]any
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
	return resp.StatusCode, out
}

// The Idempotency-Key header makes a create idempotent: the same key and spec (as
// JSON or YAML) answers 200 with the first deployment, another spec under the key is
// 409 and creates nothing, and a header that disagrees with the spec's key is 400.
func TestCreateDeploymentIdempotencyKey(t *testing.T) {
	t.Parallel()
	c := newTestCodec(t)
	b, pool, _ := secretSetup(t, c)
	ctx := context.Background()

	code, first := b.createWithKey(t, "release-1", "application/json", secretSpec)
	require.Equal(t, http.StatusAccepted, code, "%v", first)
	require.Equal(t, true, first["created"])

	asYAML := "name: with-secret\ntargets: [web-1]\nsteps:\n  - {name: s, command: \"true\", env: {PLAIN: visible}, env_secret: {TOKEN: s3cret-value}}\n"
	code, again := b.createWithKey(t, "release-1", "application/yaml", asYAML)
	require.Equal(t, http.StatusOK, code, "%v", again)
	require.Equal(t, first["id"], again["id"])
	require.Equal(t, false, again["created"])

	code, inBody := b.createWithKey(t, "", "application/json", strings.Replace(secretSpec, `"name":"with-secret",`, `"name":"with-secret","idempotency_key":"release-1",`, 1))
	require.Equal(t, http.StatusOK, code, "the body's key is the same key: %v", inBody)
	require.Equal(t, first["id"], inBody["id"])

	otherSpec := strings.Replace(secretSpec, `"PLAIN":"visible"`, `"PLAIN":"changed"`, 1)
	code, conflict := b.createWithKey(t, "release-1", "application/json", otherSpec)
	require.Equal(t, http.StatusConflict, code, "%v", conflict)
	require.Equal(t, string(api.CodeIdempotencyConflict), conflict["code"])
	require.Contains(t, conflict["detail"], first["id"])

	code, disagree := b.createWithKey(t, "release-2", "application/json", strings.Replace(secretSpec, `"name":"with-secret",`, `"name":"with-secret","idempotency_key":"release-1",`, 1))
	require.Equal(t, http.StatusBadRequest, code, "%v", disagree)
	require.Equal(t, string(api.CodeInvalidArgument), disagree["code"])

	var n int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM deployments`).Scan(&n))
	require.Equal(t, 1, n, "one deployment for one key")
	var stored string
	require.NoError(t, pool.QueryRow(ctx, `SELECT idempotency_key FROM deployments`).Scan(&stored))
	require.Equal(t, "release-1", stored)
}
