package main

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mantis-deploy/mantis/internal/cli/clitest"
	"github.com/stretchr/testify/require"
)

func ready(t *testing.T, addr string) (int, string) { return clitest.Ready(t, addr) }

func TestNotReadyUntilRegisteredWithMandible(t *testing.T) {
	isolateEnv(t)
	metrics := closedAddress(t)
	path := writeConfig(t, `
name = "thorax-1"

[mandible]
address = "`+closedAddress(t)+`"
insecure = true

[agents]
listen = "127.0.0.1:0"
insecure = true

[metrics]
listen = "`+metrics+`"
`)
	cmd := newRootCommand()
	var out syncBuffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs([]string{"--config", path})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()

	require.Eventually(t, func() bool {
		code, text := ready(t, metrics)
		return code == http.StatusServiceUnavailable && strings.Contains(text, "not registered with mandible")
	}, 10*time.Second, 20*time.Millisecond, "log so far:\n%s", out.String())
	require.Equal(t, "ok\n", body("http://"+metrics+"/healthz"), "alive though not ready")
	scrape := body("http://" + metrics + "/metrics")
	require.Contains(t, scrape, "mantis_thorax_registered 0")
	require.Contains(t, scrape, "mantis_thorax_commands_held 0")
	require.Eventually(t, func() bool {
		return strings.Contains(body("http://"+metrics+"/metrics"), `mantis_grpc_client_handled_total{code="Unavailable",method="RegisterInstance",service="mantis.v1.MandibleService"}`)
	}, 10*time.Second, 20*time.Millisecond, "the failed registrations are counted")

	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("thorax did not stop")
	}
}
