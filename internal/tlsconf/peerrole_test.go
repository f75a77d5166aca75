package tlsconf_test

import (
	"crypto/tls"
	"net"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/devcerts"
	"github.com/mantis-deploy/mantis/internal/identity"
	"github.com/mantis-deploy/mantis/internal/tlsconf"
)

// clientHandshake runs a TLS handshake over an in-memory connection and returns the
// client's error.
func clientHandshake(t *testing.T, server, client *tls.Config) error {
	t.Helper()
	sc, cc := net.Pipe()
	t.Cleanup(func() { sc.Close(); cc.Close() })
	go func() {
		_ = tls.Server(sc, server).Handshake()
		sc.Close()
	}()
	err := tls.Client(cc, client).Handshake()
	cc.Close()
	return err
}

func TestRequirePeerRoleRefusesAServerOfAnotherRole(t *testing.T) {
	t.Parallel()
	b, err := devcerts.Generate(t.TempDir(), []string{"localhost"})
	require.NoError(t, err)
	server := func(role identity.Role, name string) *tls.Config {
		cert, key, err := b.Issue(role, name, []string{"localhost"})
		require.NoError(t, err)
		cfg, err := tlsconf.Server(tlsconf.Files{CA: b.CACert(), Cert: cert, Key: key})
		require.NoError(t, err)
		return cfg
	}
	thoraxCert, thoraxKey := b.Pair("thorax")
	client, err := tlsconf.Client(tlsconf.Files{CA: b.CACert(), Cert: thoraxCert, Key: thoraxKey}, "localhost")
	require.NoError(t, err)
	tlsconf.RequirePeerRole(client, identity.RoleMandible)

	require.NoError(t, clientHandshake(t, server(identity.RoleMandible, "mandible-1"), client))
	// An agent's certificate, from the same CA, cannot pose as Mandible.
	require.ErrorContains(t, clientHandshake(t, server(identity.RoleAgent, "web-1"), client),
		`is agent/web-1, expected a mandible`)
}
