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

// handshake runs a TLS handshake over an in-memory connection and returns the
// server's error.
func handshake(t *testing.T, server, client *tls.Config) error {
	t.Helper()
	sc, cc := net.Pipe()
	t.Cleanup(func() { sc.Close(); cc.Close() })
	clientDone := make(chan struct{})
	go func() {
		defer close(clientDone)
		c := tls.Client(cc, client)
		if c.Handshake() == nil {
			// TLS 1.3 clients finish before the server has judged their
			// certificate; read so the server's verdict arrives.
			_, _ = c.Read(make([]byte, 1))
		}
		cc.Close()
	}()
	err := tls.Server(sc, server).Handshake()
	sc.Close()
	<-clientDone
	return err
}

func TestRequirePeerNames(t *testing.T) {
	t.Parallel()
	b, err := devcerts.Generate(t.TempDir(), nil)
	require.NoError(t, err)
	agentCert, agentKey := b.Pair("agent")
	server, err := tlsconf.Server(tlsconf.Files{CA: b.CACert(), Cert: agentCert, Key: agentKey})
	require.NoError(t, err)
	tlsconf.RequirePeerNames(server, []string{"thorax"})

	client := func(pair string) *tls.Config {
		cert, key := b.Pair(pair)
		cfg, err := tlsconf.Client(tlsconf.Files{CA: b.CACert(), Cert: cert, Key: key}, "localhost")
		require.NoError(t, err)
		return cfg
	}
	require.NoError(t, handshake(t, server, client("thorax")))
	require.ErrorContains(t, handshake(t, server, client("client")), `peer certificate "mantis": names none of ["thorax"]`)
	require.ErrorContains(t, handshake(t, server, client("agent")), `peer certificate "agent"`)
}

func TestRequirePeerNamesMatchesIdentityNames(t *testing.T) {
	t.Parallel()
	b, err := devcerts.Generate(t.TempDir(), nil)
	require.NoError(t, err)
	agentCert, agentKey := b.Pair("agent")
	server, err := tlsconf.Server(tlsconf.Files{CA: b.CACert(), Cert: agentCert, Key: agentKey})
	require.NoError(t, err)
	tlsconf.RequirePeerNames(server, []string{"thorax-1"})

	client := func(name string) *tls.Config {
		cert, key, err := b.Issue(identity.RoleThorax, name, nil)
		require.NoError(t, err)
		cfg, err := tlsconf.Client(tlsconf.Files{CA: b.CACert(), Cert: cert, Key: key}, "localhost")
		require.NoError(t, err)
		return cfg
	}
	require.NoError(t, handshake(t, server, client("thorax-1")))
	require.ErrorContains(t, handshake(t, server, client("thorax-2")), `peer certificate "thorax-2": names none of ["thorax-1"]`)
}
