package main

import (
	"fmt"
	"net"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/mantis-deploy/mantis/internal/cli"
	"github.com/mantis-deploy/mantis/internal/devcerts"
	"github.com/mantis-deploy/mantis/internal/identity"
	"github.com/mantis-deploy/mantis/internal/tlsconf"
)

// thoraxHealthServer serves gRPC's health service over mutual TLS with a pair of
// role, standing in for the agent's Thorax; it returns the address.
func thoraxHealthServer(t *testing.T, certs devcerts.Bundle, role identity.Role) string {
	t.Helper()
	cert, key, err := certs.Issue(role, "server-1", nil)
	require.NoError(t, err)
	tc, err := tlsconf.Server(tlsconf.Files{CA: certs.CACert(), Cert: cert, Key: key})
	require.NoError(t, err)
	srv := grpc.NewServer(grpc.Creds(credentials.NewTLS(tc)))
	healthpb.RegisterHealthServer(srv, health.NewServer())
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(srv.Stop)
	return l.Addr().String()
}

func pollConfig(t *testing.T, certs devcerts.Bundle, thorax string) string {
	t.Helper()
	cert, key, err := certs.Issue(identity.RoleAgent, "web-1", nil)
	require.NoError(t, err)
	return writeConfig(t, fmt.Sprintf(`
name = "web-1"
mode = "poll"
[thorax]
address = %q
ca_cert_path = %q
cert_path = %q
key_path = %q
[journal]
dir = %q
`, thorax, certs.CACert(), cert, key, t.TempDir()))
}

func TestCheckConfigConnectReachesThorax(t *testing.T) {
	isolateEnv(t)
	certs, err := devcerts.Generate(t.TempDir(), nil)
	require.NoError(t, err)
	thorax := thoraxHealthServer(t, certs, identity.RoleThorax)
	out, err := execute(t, "check-config", "--connect", "--config", pollConfig(t, certs, thorax))
	require.NoError(t, err, out)
	require.Contains(t, out, checkThorax+": "+cli.CheckOK+" ("+thorax+" serving)\n")
}

func TestCheckConfigConnectNamesTheThoraxFailure(t *testing.T) {
	isolateEnv(t)
	certs, err := devcerts.Generate(t.TempDir(), nil)
	require.NoError(t, err)
	for name, addr := range map[string]string{
		"closed port": func() string {
			l, err := net.Listen("tcp", "127.0.0.1:0")
			require.NoError(t, err)
			require.NoError(t, l.Close())
			return l.Addr().String()
		}(),
		"not a thorax": thoraxHealthServer(t, certs, identity.RoleMandible),
	} {
		out, err := execute(t, "check-config", "--connect", "--config", pollConfig(t, certs, addr))
		var checkErr *cli.CheckError
		require.ErrorAs(t, err, &checkErr, name)
		require.Len(t, checkErr.Failed, 1, name)
		require.Contains(t, checkErr.Failed[0], checkThorax+": calling the health service at "+addr, name)
		require.Contains(t, out, checkThorax+": "+cli.CheckFailed, name)
	}
}
