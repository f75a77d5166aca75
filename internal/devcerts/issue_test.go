package devcerts_test

import (
	"crypto/x509"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/devcerts"
	"github.com/mantis-deploy/mantis/internal/identity"
)

func TestGeneratedPairsCarryTheirIdentity(t *testing.T) {
	t.Parallel()
	b, err := devcerts.Generate(t.TempDir(), nil)
	require.NoError(t, err)
	want := map[string]string{
		"mandible": "spiffe://mantis/mandible/mandible",
		"rabbitmq": "spiffe://mantis/rabbitmq/rabbitmq",
		"thorax":   "spiffe://mantis/thorax/thorax",
		"agent":    "spiffe://mantis/agent/agent",
		"client":   "spiffe://mantis/client/client",
	}
	for name, uri := range want {
		certPath, _ := b.Pair(name)
		cert := readCert(t, certPath)
		require.Len(t, cert.URIs, 1, name)
		require.Equal(t, uri, cert.URIs[0].String(), name)
	}
}

func TestGenerateReplacesAPairOfAnotherIdentity(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	b, err := devcerts.Generate(dir, nil)
	require.NoError(t, err)
	// A pair valid in every other way (same CA, usages and hosts) but carrying
	// another role stands in the thorax files.
	oldCert, oldKey, err := b.Issue(identity.RoleAgent, "thorax", nil)
	require.NoError(t, err)
	thoraxCert, thoraxKey := b.Pair("thorax")
	for from, to := range map[string]string{oldCert: thoraxCert, oldKey: thoraxKey} {
		data, err := os.ReadFile(from)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(to, data, 0o600))
	}
	_, err = devcerts.Generate(dir, nil)
	require.NoError(t, err)
	id, err := identity.FromCertificate(readCert(t, thoraxCert))
	require.NoError(t, err)
	require.Equal(t, identity.ID{Role: identity.RoleThorax, Name: "thorax"}, id)
}

func TestIssue(t *testing.T) {
	t.Parallel()
	b, err := devcerts.Generate(t.TempDir(), nil)
	require.NoError(t, err)

	certPath, keyPath, err := b.Issue(identity.RoleAgent, "web-1", []string{"web-1.example"})
	require.NoError(t, err)
	cert := readCert(t, certPath)
	require.True(t, readKey(t, keyPath).PublicKey.Equal(cert.PublicKey))
	id, err := identity.FromCertificate(cert)
	require.NoError(t, err)
	require.Equal(t, identity.ID{Role: identity.RoleAgent, Name: "web-1"}, id)
	require.Equal(t, "web-1", cert.Subject.CommonName)
	for _, usage := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
		_, err := cert.Verify(x509.VerifyOptions{Roots: roots(t, b), KeyUsages: []x509.ExtKeyUsage{usage}})
		require.NoError(t, err)
	}
	for _, host := range []string{"web-1.example", "web-1", "localhost", "127.0.0.1"} {
		require.NoError(t, cert.VerifyHostname(host))
	}
	info, err := os.Stat(keyPath)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), info.Mode().Perm())

	// Issuing again keeps the pair.
	before, err := os.ReadFile(certPath)
	require.NoError(t, err)
	_, _, err = b.Issue(identity.RoleAgent, "web-1", []string{"web-1.example"})
	require.NoError(t, err)
	after, err := os.ReadFile(certPath)
	require.NoError(t, err)
	require.Equal(t, before, after)

	// A client pair authenticates clients only.
	clientCert, _, err := b.Issue(identity.RoleClient, "ci", nil)
	require.NoError(t, err)
	require.Equal(t, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, readCert(t, clientCert).ExtKeyUsage)

	_, _, err = b.Issue("root", "x", nil)
	require.ErrorContains(t, err, `role "root"`)
	_, _, err = b.Issue(identity.RoleAgent, "../x", nil)
	require.ErrorContains(t, err, `name "../x"`)
	_, _, err = devcerts.Bundle{Dir: t.TempDir()}.Issue(identity.RoleAgent, "web-1", nil)
	require.ErrorContains(t, err, "loading the CA")
}
