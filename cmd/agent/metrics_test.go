package main

import (
	"strings"
	"testing"
	"time"

	"github.com/mantis-deploy/mantis/internal/cli/clitest"
	"github.com/stretchr/testify/require"
)

func freeAddress(t *testing.T) string { return clitest.FreeAddress(t) }

func body(url string) string { return clitest.Body(url) }

func TestMetricsListenerServesGoroutinesAndHealthUntilStopped(t *testing.T) {
	isolateEnv(t)
	metrics := freeAddress(t)
	path := writeConfig(t, `
name = "web-1"
mode = "listen"

[listen]
address = "127.0.0.1:0"
insecure = true

[metrics]
listen = "`+metrics+`"
`)
	out, stop := serve(t, "--config", path)
	require.Eventually(t, func() bool { return strings.Contains(body("http://"+metrics+"/metrics"), "go_goroutines ") },
		10*time.Second, 20*time.Millisecond, "log so far:\n%s", out)
	require.Contains(t, body("http://"+metrics+"/metrics"), "process_open_fds ")
	require.Equal(t, "ok\n", body("http://"+metrics+"/healthz"))

	require.NoError(t, stop())
	require.Empty(t, body("http://"+metrics+"/healthz"), "the listener stops with the agent")
}

func TestMetricsListenerIsOffByDefault(t *testing.T) {
	isolateEnv(t)
	out, err := execute(t, "check-config", "--config", writeConfig(t, "name = \"web-1\"\nmode = \"poll\"\n[thorax]\naddress = \"127.0.0.1:1\"\ninsecure = true\n"))
	require.NoError(t, err)
	require.Contains(t, out, "[metrics]\n  listen = \"\"")
}

func TestMetricsListenAddressIsValidated(t *testing.T) {
	isolateEnv(t)
	_, err := execute(t, "check-config", "--config", writeConfig(t, "name = \"web-1\"\nmode = \"poll\"\n[thorax]\naddress = \"127.0.0.1:1\"\ninsecure = true\n[metrics]\nlisten = \"nowhere\"\n"))
	require.Equal(t, []string{`metrics.listen: must be host:port, got "nowhere"`}, problemLines(t, err))
}
