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

	"github.com/mantis-deploy/mantis/internal/broker"
	"github.com/mantis-deploy/mantis/internal/cli"
	"github.com/mantis-deploy/mantis/internal/devcerts"
	"github.com/mantis-deploy/mantis/internal/identity"
	"github.com/mantis-deploy/mantis/internal/testrig/testenv"
	"github.com/mantis-deploy/mantis/internal/tlsconf"
)

// healthServer serves gRPC's health service over mutual TLS with a pair of role,
// standing in for a server Thorax calls; it returns the address.
func healthServer(t *testing.T, certs devcerts.Bundle, role identity.Role) string {
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

// thoraxConnectConfig writes a thorax.toml whose Mandible is at mandible and whose
// broker is the test stack's, with brokerPassword.
func thoraxConnectConfig(t *testing.T, certs devcerts.Bundle, mandible, brokerPassword string) string {
	t.Helper()
	cert, key, err := certs.Issue(identity.RoleThorax, "thorax-1", nil)
	require.NoError(t, err)
	b := testenv.RabbitMQ(t)
	return writeConfig(t, fmt.Sprintf(`
name = "thorax-1"
[mandible]
address = %q
ca_cert_path = %q
cert_path = %q
key_path = %q
[agents]
listen = "127.0.0.1:0"
insecure = true
[queue]
enabled = true
host = %q
port = %d
username = %q
password = %q
vhost = %q
ca_cert_path = %q
client_cert_path = %q
client_key_path = %q
`, mandible, certs.CACert(), cert, key, b.Host, b.Port, b.User, brokerPassword, b.VHost, b.CACert, b.ClientCert, b.ClientKey))
}

func TestCheckConfigConnectReachesMandibleAndTheBroker(t *testing.T) {
	isolateEnv(t)
	certs, err := devcerts.Generate(t.TempDir(), nil)
	require.NoError(t, err)
	mandible := healthServer(t, certs, identity.RoleMandible)
	out, err := execute(t, "check-config", "--connect", "--config",
		thoraxConnectConfig(t, certs, mandible, testenv.RabbitMQ(t).Password))
	require.NoError(t, err, out)
	require.Contains(t, out, checkMandible+": "+cli.CheckOK+" ("+mandible+" serving)\n")
	require.Regexp(t, "(?m)^"+broker.CheckName+": "+cli.CheckOK+" ", out)
}

func TestCheckConfigConnectNamesMandibleAndBrokerFailures(t *testing.T) {
	isolateEnv(t)
	certs, err := devcerts.Generate(t.TempDir(), nil)
	require.NoError(t, err)

	// An agent's certificate where Mandible should be: the role check refuses it.
	impostor := healthServer(t, certs, identity.RoleAgent)
	out, err := execute(t, "check-config", "--connect", "--config", thoraxConnectConfig(t, certs, impostor, "wrong-password"))
	var checkErr *cli.CheckError
	require.ErrorAs(t, err, &checkErr, out)
	require.Len(t, checkErr.Failed, 2, out)
	require.Contains(t, checkErr.Failed[0], checkMandible+": calling the health service at "+impostor)
	require.Contains(t, checkErr.Failed[0], "expected a mandible")
	require.Contains(t, checkErr.Failed[1], broker.CheckName+": connecting to broker")
	require.NotContains(t, out, "wrong-password")

	closed := closedAddress(t)
	_, err = execute(t, "check-config", "--connect", "--config", thoraxConnectConfig(t, certs, closed, testenv.RabbitMQ(t).Password))
	require.ErrorAs(t, err, &checkErr)
	require.Len(t, checkErr.Failed, 1)
	require.Contains(t, checkErr.Failed[0], checkMandible+": calling the health service at "+closed)
}
