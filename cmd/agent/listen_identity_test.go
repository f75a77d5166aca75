package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/devcerts"
)

// A listen agent serving a certificate that names another target (here the
// shared "agent" pair, agent/agent, on the agent of web-1) would be refused by
// every Thorax and never get a command: it does not start, and says why,
// naming both identities.
func TestListenAgentRefusesToServeAnotherTargetsCertificate(t *testing.T) {
	isolateEnv(t)
	certs, err := devcerts.Generate(t.TempDir(), nil)
	require.NoError(t, err)
	shared, sharedKey := certs.Pair("agent")
	conf := fmt.Sprintf(`
name = "web-1"
mode = "listen"

[listen]
address = %q
ca_cert_path = %q
cert_path = %q
key_path = %q
`, freeAddress(t), certs.CACert(), shared, sharedKey)

	cmd := newRootCommand()
	out := &lockedBuffer{}
	cmd.SetOut(out)
	cmd.SetErr(out)
	cmd.SetArgs([]string{"--config", writeConfig(t, conf)})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()
	serving := make(chan struct{})
	go func() {
		defer close(serving)
		for ctx.Err() == nil && !strings.Contains(out.String(), "serving agent service") {
			select {
			case <-ctx.Done():
			case <-time.After(10 * time.Millisecond):
			}
		}
	}()
	select {
	case err := <-done:
		require.ErrorContains(t, err, "the certificate is agent/agent, the agent is agent/web-1")
		require.ErrorContains(t, err, "mantisctl dev certs --issue agent/web-1")
	case <-serving:
		require.FailNow(t, "the agent of web-1 serves the certificate of agent/agent", out.String())
	case <-time.After(30 * time.Second):
		require.FailNow(t, "the agent neither failed nor served", out.String())
	}
}
