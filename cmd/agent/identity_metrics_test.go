package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	"github.com/mantis-deploy/mantis/internal/devcerts"
	"github.com/mantis-deploy/mantis/internal/identity"
	"github.com/mantis-deploy/mantis/internal/tlsconf"
	mantisv1 "github.com/mantis-deploy/mantis/proto/mantis/v1"
)

// A listen agent refuses another agent's certificate, and its metrics listener
// shows the refusal and the expiry of the agent's own certificate.
func TestListenAgentServesItsIdentityMetrics(t *testing.T) {
	isolateEnv(t)
	certs, err := devcerts.Generate(t.TempDir(), nil)
	require.NoError(t, err)
	cert, key, err := certs.Issue(identity.RoleAgent, "web-1", nil)
	require.NoError(t, err)
	metrics, addr := freeAddress(t), freeAddress(t)
	path := writeConfig(t, fmt.Sprintf(`
name = "web-1"
mode = "listen"

[listen]
address = %q
ca_cert_path = %q
cert_path = %q
key_path = %q

[journal]
dir = %q

[metrics]
listen = %q
`, addr, certs.CACert(), cert, key, t.TempDir(), metrics))
	out, stop := serve(t, "--config", path)
	defer func() { require.NoError(t, stop()) }()

	otherCert, otherKey, err := certs.Issue(identity.RoleAgent, "web-2", nil)
	require.NoError(t, err)
	tc, err := tlsconf.Client(tlsconf.Files{CA: certs.CACert(), Cert: otherCert, Key: otherKey}, "localhost")
	require.NoError(t, err)
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(tc)))
	require.NoError(t, err)
	defer conn.Close()
	require.Eventually(t, func() bool {
		_, err := mantisv1.NewAgentServiceClient(conn).CancelCommand(t.Context(), &mantisv1.CancelCommandRequest{CommandId: "x"})
		return status.Code(err) == codes.PermissionDenied
	}, 10*time.Second, 50*time.Millisecond, "log so far:\n%s", out)

	own, err := identity.ReadCertificate(cert)
	require.NoError(t, err)
	expiry := fmt.Sprintf(`%s{name="web-1",role="agent"} %g`, identity.ExpiryMetric, float64(own.NotAfter.Unix()))
	refusal := identity.RefusalsMetric + `{expected="thorax",link="listen_agent",presented="agent"} 1`
	require.Eventually(t, func() bool {
		b := body("http://" + metrics + "/metrics")
		return strings.Contains(b, expiry) && strings.Contains(b, refusal)
	}, 10*time.Second, 20*time.Millisecond, "metrics:\n%s", body("http://"+metrics+"/metrics"))
}
