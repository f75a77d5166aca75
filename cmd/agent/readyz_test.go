package main

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mantis-deploy/mantis/internal/cli/clitest"
	"github.com/stretchr/testify/require"
)

func ready(t *testing.T, addr string) (int, string) { return clitest.Ready(t, addr) }

func TestReadyWhileServingInListenMode(t *testing.T) {
	isolateEnv(t)
	metrics := freeAddress(t)
	out, stop := serve(t, "--config", writeConfig(t, `
name = "web-1"
mode = "listen"

[listen]
address = "127.0.0.1:0"
insecure = true

[metrics]
listen = "`+metrics+`"
`))
	require.Eventually(t, func() bool { code, _ := ready(t, metrics); return code == http.StatusOK },
		10*time.Second, 20*time.Millisecond, "log so far:\n%s", out)
	require.Contains(t, body("http://"+metrics+"/metrics"), "mantis_agent_command_output_bytes_count 0")
	require.NoError(t, stop())
}

func TestNotReadyWhilePollModeCannotReachThorax(t *testing.T) {
	isolateEnv(t)
	metrics := freeAddress(t)
	out, stop := serve(t, "--config", writeConfig(t, `
name = "web-1"
mode = "poll"

[thorax]
address = "`+freeAddress(t)+`"
insecure = true

[metrics]
listen = "`+metrics+`"
`))
	require.Eventually(t, func() bool {
		code, text := ready(t, metrics)
		return code == http.StatusServiceUnavailable && strings.Contains(text, "not connected to thorax")
	}, 10*time.Second, 20*time.Millisecond, "log so far:\n%s", out)
	require.Equal(t, "ok\n", body("http://"+metrics+"/healthz"), "alive though not ready")
	require.Contains(t, body("http://"+metrics+"/metrics"), `mantis_grpc_client_handled_total{code="Unavailable",method="PollCommands",service="mantis.v1.ThoraxService"}`)
	require.NoError(t, stop())
}
