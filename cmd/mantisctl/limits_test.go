package main

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/domain"
	"github.com/mantis-deploy/mantis/internal/mandible/httpapi"
	"github.com/mantis-deploy/mantis/internal/testrig/testenv"
	"github.com/mantis-deploy/mantis/schema"
)

func TestLimitsSetListDeleteAndHeldRequests(t *testing.T) {
	pool := testenv.MigratedPool(t)
	srv := httptest.NewServer(httpapi.New(httpapi.Options{DB: pool, Tokens: []string{apiToken}, HeartbeatTimeout: time.Hour}))
	t.Cleanup(srv.Close)
	common := []string{"--server", srv.URL, "--token-file", tokenFile(t), "--client-config", ""}
	cli := func(args ...string) string {
		t.Helper()
		out, err := runCLI(t, append(args, common...)...)
		require.NoError(t, err, out)
		return out
	}

	out := cli("limits", "set", "prod-two", "--scope", "label", "--label", "env", "--value", "prod", "--max-running", "2")
	require.Contains(t, out, "limit prod-two: at most 2 running on targets with env=prod")
	out = cli("limits", "list")
	require.Contains(t, out, "prod-two")
	require.Contains(t, out, "targets with env=prod")
	require.Contains(t, out, domain.DefaultTargetLimit)
	_, err := runCLI(t, append([]string{"limits", "set", "bad", "--scope", "label", "--max-running", "2"}, common...)...)
	require.ErrorContains(t, err, "label", "the refusal names the field")

	cli("targets", "register", "web-1", "--mode", "poll")
	c, err := (&clientFlags{server: srv.URL, token: apiToken, output: "text"}).client()
	require.NoError(t, err)
	require.NoError(t, c.Do(context.Background(), "POST", "/api/v1/dispatch-requests", map[string]any{"requests": []map[string]string{
		{"idempotency_key": "a", "target": "web-1", "command": "true"}, {"idempotency_key": "b", "target": "web-1", "command": "true"}}}, nil))
	_, err = schema.ClaimPending(context.Background(), pool, "r1", 10)
	require.NoError(t, err)
	out = cli("requests", "--status", "pending")
	require.Contains(t, out, "HELD BY")
	require.Contains(t, out, domain.DefaultTargetLimit+"  ", "the held request names the per-target default")

	require.Contains(t, cli("limits", "delete", "prod-two"), "deleted limit prod-two")
	require.NotContains(t, cli("limits", "list"), "prod-two")
}
