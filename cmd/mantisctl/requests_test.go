package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http/httptest"
	"os"
	"testing"
	"time"

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
	require.NoError(t, c.Do(context.Background(), "POST", "/api/v1/dispatch-requests",
		map[string]any{"requests": []map[string]string{{"idempotency_key": "k1", "target": "web-1", "command": "uptime", "priority": "high"}}}, nil))

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
