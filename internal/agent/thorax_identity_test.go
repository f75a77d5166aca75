package agent

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/mantis-deploy/mantis/internal/config"
	"github.com/mantis-deploy/mantis/internal/devcerts"
	"github.com/mantis-deploy/mantis/internal/identity"
	"github.com/mantis-deploy/mantis/internal/tlsconf"
)

// A poll agent talks only to a Thorax: a server presenting another role's
// certificate from the same CA is refused at the handshake.
func TestPollAgentRefusesAServerThatIsNotThorax(t *testing.T) {
	b, err := devcerts.Generate(t.TempDir(), []string{"localhost", "127.0.0.1"})
	require.NoError(t, err)
	agentCert, agentKey, err := b.Issue(identity.RoleAgent, "web-1", []string{"localhost"})
	require.NoError(t, err)
	creds, err := ThoraxCredentials(config.Endpoint{TLS: config.TLS{CACertPath: b.CACert(), CertPath: agentCert, KeyPath: agentKey}})
	require.NoError(t, err)

	serve := func(role identity.Role, name string) string {
		cert, key, err := b.Issue(role, name, []string{"localhost", "127.0.0.1"})
		require.NoError(t, err)
		tc, err := tlsconf.Server(tlsconf.Files{CA: b.CACert(), Cert: cert, Key: key})
		require.NoError(t, err)
		srv := grpc.NewServer(grpc.Creds(credentials.NewTLS(tc)))
		healthpb.RegisterHealthServer(srv, health.NewServer())
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		go func() { _ = srv.Serve(ln) }()
		t.Cleanup(srv.Stop)
		return ln.Addr().String()
	}
	check := func(addr string) error {
		conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
		require.NoError(t, err)
		defer conn.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err = healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
		return err
	}
	require.NoError(t, check(serve(identity.RoleThorax, "thorax-1")))
	err = check(serve(identity.RoleMandible, "mandible-1"))
	require.Error(t, err)
	require.Contains(t, err.Error(), "expected a thorax")
}
