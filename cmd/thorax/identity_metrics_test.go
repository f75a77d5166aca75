package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/devcerts"
	"github.com/mantis-deploy/mantis/internal/identity"
)

// Thorax's metrics listener shows the expiry of its own certificate, under the
// identity the certificate carries, from start (before Mandible answers).
func TestMetricsListenerServesTheCertificateExpiry(t *testing.T) {
	isolateEnv(t)
	certs, err := devcerts.Generate(t.TempDir(), nil)
	require.NoError(t, err)
	cert, key, err := certs.Issue(identity.RoleThorax, "thorax-1", nil)
	require.NoError(t, err)
	metrics := closedAddress(t)
	path := writeConfig(t, fmt.Sprintf(`
name = "thorax-1"

[mandible]
address = %q
ca_cert_path = %q
cert_path = %q
key_path = %q

[agents]
listen = "127.0.0.1:0"
ca_cert_path = %q
cert_path = %q
key_path = %q

[metrics]
listen = %q
`, closedAddress(t), certs.CACert(), cert, key, certs.CACert(), cert, key, metrics))
	cmd := newRootCommand()
	var out syncBuffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs([]string{"--config", path})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()

	own, err := identity.ReadCertificate(cert)
	require.NoError(t, err)
	expiry := fmt.Sprintf(`%s{name="thorax-1",role="thorax"} %g`, identity.ExpiryMetric, float64(own.NotAfter.Unix()))
	require.Eventually(t, func() bool { return strings.Contains(body("http://"+metrics+"/metrics"), expiry) },
		10*time.Second, 20*time.Millisecond, "log so far:\n%s", out.String())

	cancel()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("thorax did not stop")
	}
}
