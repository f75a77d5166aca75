package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/contract/api"
	"github.com/mantis-deploy/mantis/internal/mandible/httpapi"
	"github.com/mantis-deploy/mantis/internal/testrig/testenv"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

const apiToken = "test-token-0123456789abcdef"

func apiServer(t *testing.T) string {
	t.Helper()
	pool := testenv.MigratedPool(t)
	srv := httptest.NewServer(httpapi.New(httpapi.Options{DB: pool, Tokens: []string{apiToken}, HeartbeatTimeout: time.Hour}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func runCLI(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := newRootCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(context.Background())
	return out.String(), err
}

func TestRequestsShowsStateAndReason(t *testing.T) {
	url := apiServer(t)
	common := []string{"--server", url, "--token-file", tokenFile(t), "--client-config", ""}
	_, err := runCLI(t, append([]string{"targets", "register", "web-1", "--mode", "poll", "--label", "role=web"}, common...)...)
	require.NoError(t, err)

	c, err := (&clientFlags{server: url, token: apiToken, output: "text"}).client()
	require.NoError(t, err)
	one := []api.NewDispatchRequest{{IdempotencyKey: "k1", Target: "web-1", Command: "uptime", Priority: "high"}}
	stored, err := c.EnqueueDispatchRequests(context.Background(), one)
	require.NoError(t, err)
	require.Len(t, stored, 1)
	require.NotEqual(t, uuid.Nil, stored[0].ID, "the answer's snake_case id decodes")
	require.Equal(t, "k1", stored[0].IdempotencyKey)
	require.True(t, stored[0].Created)
	require.WithinDuration(t, time.Now().Add(24*time.Hour), stored[0].ExpiresAt, time.Hour)
	again, err := c.EnqueueDispatchRequests(context.Background(), one)
	require.NoError(t, err)
	require.Equal(t, stored[0].ID, again[0].ID)
	require.False(t, again[0].Created, "the same key names the same request")

	out, err := runCLI(t, append([]string{"requests", "--status", "pending"}, common...)...)
	require.NoError(t, err)
	require.Contains(t, out, "web-1")
	require.Contains(t, out, "0/11") // 0 failed deliveries of the 11 the budget allows
	require.Contains(t, out, "no live Thorax for target web-1")

	out, err = runCLI(t, append([]string{"requests", "-o", "json"}, common...)...)
	require.NoError(t, err)
	var views []api.DispatchRequest
	require.NoError(t, json.Unmarshal([]byte(out), &views))
	require.Len(t, views, 1)
	require.Equal(t, "pending", views[0].Status)

	out, err = runCLI(t, append([]string{"targets", "-o", "json"}, common...)...)
	require.NoError(t, err)
	require.Contains(t, out, `"role": "web"`)
}

func TestClientCommandsNeedAToken(t *testing.T) {
	t.Setenv("MANTIS_API_TOKEN", "")
	_, err := runCLI(t, "requests", "--server", "http://127.0.0.1:1", "--client-config", "")
	require.ErrorContains(t, err, "no API token")
}

func TestClientReportsAPIErrorsByField(t *testing.T) {
	url := apiServer(t)
	_, err := runCLI(t, "targets", "register", "bad name", "--mode", "listen", "--server", url, "--token-file", tokenFile(t), "--client-config", "")
	require.Error(t, err)
	require.Contains(t, err.Error(), "name: must match")
	require.Contains(t, err.Error(), "address: required for listen-mode targets")
}
