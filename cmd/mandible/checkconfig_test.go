package main

import (
	"fmt"
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/broker"
	"github.com/mantis-deploy/mantis/internal/cli"
	"github.com/mantis-deploy/mantis/internal/cli/clitest"
	"github.com/mantis-deploy/mantis/internal/testrig/testenv"
)

// closedPort returns a loopback address nothing listens on.
func closedPort(t *testing.T) string { return clitest.FreeAddress(t) }

// connectConfig writes a mandible.toml that reaches the test stack's PostgreSQL,
// RabbitMQ (the broker's password given) and Temporal, with dbURL as database.url.
func connectConfig(t *testing.T, dbURL, brokerPassword string) string {
	t.Helper()
	b := testenv.RabbitMQ(t)
	tmp := testenv.TemporalServer(t)
	return writeConfig(t, fmt.Sprintf(`
[database]
url = %q
[http]
tokens = [%q]
[grpc]
insecure = true
[temporal]
address = %q
namespace = %q
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
`, dbURL, apiToken, tmp.Address, tmp.Namespace, b.Host, b.Port, b.User, brokerPassword, b.VHost, b.CACert, b.ClientCert, b.ClientKey))
}

func TestCheckConfigConnectReachesEveryDependency(t *testing.T) {
	isolateEnv(t)
	b := testenv.RabbitMQ(t)
	out, err := execute(t, "check-config", "--connect", "--config", connectConfig(t, testenv.DatabaseURL(t), b.Password))
	require.NoError(t, err, out)
	t.Log(out)
	for _, check := range []string{checkDatabase, broker.CheckName, checkTemporal} {
		require.Regexp(t, "(?m)^"+check+": "+cli.CheckOK+"( |$)", out)
	}
	require.Regexp(t, `(?m)^postgresql: ok \(.*schema version \d+ of \d+\)$`, out)
}

func TestCheckConfigConnectNamesTheFailedCheck(t *testing.T) {
	isolateEnv(t)
	u, err := url.Parse(testenv.DatabaseURL(t))
	require.NoError(t, err)
	u.Host = closedPort(t)
	path := connectConfig(t, u.String(), "wrong-password")

	out, err := execute(t, "check-config", "--config", path)
	require.NoError(t, err, "without --connect, check-config stays offline")
	require.NotContains(t, out, cli.CheckFailed)

	out, err = execute(t, "check-config", "--connect", "--config", path)
	var checkErr *cli.CheckError
	require.ErrorAs(t, err, &checkErr)
	require.Len(t, checkErr.Failed, 2, out)
	require.Contains(t, checkErr.Failed[0], checkDatabase+": connecting to 127.0.0.1:"+u.Port())
	require.Contains(t, checkErr.Failed[1], broker.CheckName+": connecting to broker")
	require.Contains(t, err.Error(), "dependency checks failed: "+checkDatabase+": ")
	require.Regexp(t, "(?m)^"+checkDatabase+": "+cli.CheckFailed+" connecting to", out)
	require.Regexp(t, "(?m)^"+broker.CheckName+": "+cli.CheckFailed+" ", out)
	require.Regexp(t, "(?m)^"+checkTemporal+": "+cli.CheckOK, out, "the other checks still run")
	require.NotContains(t, out, "wrong-password")
}
