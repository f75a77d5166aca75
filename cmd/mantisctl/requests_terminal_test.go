package main

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/mandible/httpapi"
	"github.com/mantis-deploy/mantis/internal/testrig/testenv"
)

// A request's reason quotes what failed, which may be text an agent or a command
// wrote: `requests` prints it with control characters escaped.
func TestRequestsPrintsReasonsSafelyForATerminal(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := testenv.MigratedPool(t)
	srv := httptest.NewServer(httpapi.New(httpapi.Options{DB: pool, Tokens: []string{apiToken}, HeartbeatTimeout: time.Hour}))
	t.Cleanup(srv.Close)
	common := []string{"--server", srv.URL, "--token-file", tokenFile(t), "--client-config", ""}
	_, err := runCLI(t, append([]string{"targets", "register", "web-1", "--mode", "poll"}, common...)...)
	require.NoError(t, err)
	c, err := (&clientFlags{server: srv.URL, token: apiToken, output: "text"}).client()
	require.NoError(t, err)
	require.NoError(t, c.Do(ctx, "POST", "/api/v1/dispatch-requests",
		map[string]any{"requests": []map[string]string{{"idempotency_key": "k1", "target": "web-1", "command": "uptime", "priority": "normal"}}}, nil))
	_, err = pool.Exec(ctx, `UPDATE pending_dispatch_requests
		SET attempts = 1, next_attempt_at = now() + interval '1 hour', last_error = E'agent said \\x1b[2J\\x07gone'
		WHERE idempotency_key = 'k1'`)
	require.NoError(t, err)

	out, err := runCLI(t, append([]string{"requests"}, common...)...)
	require.NoError(t, err)
	require.Contains(t, out, `agent said \x1b[2J\x07gone`)
	requireTerminalSafe(t, out)
}
