package tlsconf_test

import (
	"context"
	"crypto/tls"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/mantis-deploy/mantis/internal/devcerts"
	"github.com/mantis-deploy/mantis/internal/identity"
	"github.com/mantis-deploy/mantis/internal/tlsconf"
)

// healthCall calls the health service at addr over mutual TLS with cfg.
func healthCall(t *testing.T, addr string, cfg *tls.Config) error {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
	require.NoError(t, err)
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err = healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{}, grpc.WaitForReady(false))
	return err
}

// A gRPC server on Server's configuration, with RequirePeerNames added as the listen
// agent does, accepts clients of a CA added to its bundle on disk, without a restart:
// the configuration swapped in for the new bundle still negotiates h2 and still checks
// the names.
func TestGRPCServerFollowsChangedClientCABundle(t *testing.T) {
	t.Parallel()
	r := setupRotation(t)
	serverCfg, err := tlsconf.Server(r.live)
	require.NoError(t, err)
	tlsconf.RequirePeerNames(serverCfg, []string{"t1"})
	srv := grpc.NewServer(grpc.Creds(credentials.NewTLS(serverCfg)))
	healthpb.RegisterHealthServer(srv, health.NewServer())
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(srv.Stop)
	addr := l.Addr().String()

	require.NoError(t, healthCall(t, addr, clientConfig(t, r.bundle, r.bundle.CACert())))

	newCA, err := devcerts.Generate(filepath.Join(t.TempDir(), "new-ca"), nil)
	require.NoError(t, err)
	client := clientConfig(t, newCA, r.bundle.CACert())
	require.Error(t, healthCall(t, addr, client), "a client of an unknown CA is refused")

	oldPEM, err := os.ReadFile(r.bundle.CACert())
	require.NoError(t, err)
	newPEM, err := os.ReadFile(newCA.CACert())
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(r.live.CA+".tmp", append(oldPEM, newPEM...), 0o600))
	require.NoError(t, os.Rename(r.live.CA+".tmp", r.live.CA))
	require.Eventually(t, func() bool { return healthCall(t, addr, client) == nil },
		10*time.Second, 50*time.Millisecond, "the new CA's client is accepted over gRPC without a restart")

	cert, key, err := newCA.Issue(identity.RoleThorax, "someone-else", nil)
	require.NoError(t, err)
	other, err := tlsconf.Client(tlsconf.Files{CA: r.bundle.CACert(), Cert: cert, Key: key}, "localhost")
	require.NoError(t, err)
	require.Error(t, healthCall(t, addr, other), "the names check still holds on the new bundle")
}
