package main

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/devcerts"
)

// execute executes the root command in process with args and returns what it printed.
func execute(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := newRootCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(context.Background())
	return out.String(), err
}

func readCert(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	block, _ := pem.Decode(data)
	require.NotNil(t, block, "no PEM block in %s", path)
	cert, err := x509.ParseCertificate(block.Bytes)
	require.NoError(t, err)
	return cert
}

func TestHelpListsSubcommands(t *testing.T) {
	t.Parallel()
	out, err := execute(t, "--help")
	require.NoError(t, err)
	for _, sub := range []string{"dev", "requests", "targets"} {
		require.Contains(t, out, "\n  "+sub+" ", "--help lists %s:\n%s", sub, out)
	}

	out, err = execute(t, "dev", "--help")
	require.NoError(t, err)
	for _, sub := range []string{"up", "exec", "certs", "install"} {
		require.Contains(t, out, "\n  "+sub+" ", "dev --help lists %s:\n%s", sub, out)
	}

	out, err = execute(t, "dev", "certs", "--help")
	require.NoError(t, err)
	require.Contains(t, out, "--dir")
	require.Contains(t, out, "--host")
}

func TestDevCertsWritesCAAndPairs(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "certs")
	out, err := execute(t, "dev", "certs", "--dir", dir, "--host", "mandible.internal")
	require.NoError(t, err)

	bundle := devcerts.Bundle{Dir: dir}
	require.Contains(t, out, bundle.CACert())
	ca := readCert(t, bundle.CACert())
	require.True(t, ca.IsCA)
	roots := x509.NewCertPool()
	roots.AddCert(ca)

	for _, name := range devcerts.PairNames() {
		certPath, keyPath := bundle.Pair(name)
		require.Contains(t, out, certPath)
		cert := readCert(t, certPath)
		_, err := cert.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}})
		require.NoError(t, err, "%s is signed by the CA", name)
		st, err := os.Stat(keyPath)
		require.NoError(t, err)
		require.Equal(t, os.FileMode(0o600), st.Mode().Perm(), "%s is private", keyPath)
	}
	mandible, _ := bundle.Pair("mandible")
	require.NoError(t, readCert(t, mandible).VerifyHostname("mandible.internal"), "--host reaches the server certificates")

	// A second run keeps what is valid.
	before, err := os.ReadFile(mandible)
	require.NoError(t, err)
	_, err = execute(t, "dev", "certs", "--dir", dir, "--host", "mandible.internal")
	require.NoError(t, err)
	after, err := os.ReadFile(mandible)
	require.NoError(t, err)
	require.Equal(t, before, after)
}
