package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/mantis-deploy/mantis/internal/cli/clitest"
	"github.com/stretchr/testify/require"
)

func body(url string) string { return clitest.Body(url) }

func TestMetricsListenerServesGoroutinesAndHealthUntilStopped(t *testing.T) {
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

	require.Eventually(t, func() bool { return strings.Contains(body("http://"+metrics+"/metrics"), "go_goroutines ") },
		10*time.Second, 20*time.Millisecond, "log so far:\n%s", out.String())
	require.Contains(t, body("http://"+metrics+"/metrics"), "process_resident_memory_bytes ")
	require.Equal(t, "ok\n", body("http://"+metrics+"/healthz"))

	cancel() // as SIGTERM does
	select {
	case err := <-done:
		require.NoError(t, err, "a stop is a clean exit")
	case <-time.After(30 * time.Second):
		t.Fatal("thorax did not stop")
	}
	require.Empty(t, body("http://"+metrics+"/healthz"), "the listener stops with Thorax")
}

func TestMetricsListenAddressIsValidated(t *testing.T) {
	isolateEnv(t)
	path := writeConfig(t, "name = \"thorax-1\"\n[mandible]\ninsecure = true\n[agents]\ninsecure = true\n[metrics]\nlisten = \"nowhere\"\n")
	_, err := execute(t, "check-config", "--config", path)
	require.Equal(t, []string{`metrics.listen: must be host:port, got "nowhere"`}, problemLines(t, err))
}
