package devcerts_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/devcerts"
)

func readCert(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	block, _ := pem.Decode(data)
	require.NotNil(t, block, path)
	require.Equal(t, "CERTIFICATE", block.Type)
	cert, err := x509.ParseCertificate(block.Bytes)
	require.NoError(t, err)
	return cert
}

func readKey(t *testing.T, path string) *ecdsa.PrivateKey {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	block, _ := pem.Decode(data)
	require.NotNil(t, block, path)
	key, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	require.NoError(t, err)
	ec, ok := key.(*ecdsa.PrivateKey)
	require.True(t, ok)
	return ec
}

// snapshot returns the contents of every file in dir.
func snapshot(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	files := map[string][]byte{}
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		require.NoError(t, err)
		files[e.Name()] = data
	}
	return files
}

func roots(t *testing.T, b devcerts.Bundle) *x509.CertPool {
	t.Helper()
	pool := x509.NewCertPool()
	pool.AddCert(readCert(t, b.CACert()))
	return pool
}

func TestGenerate(t *testing.T) {
	t.Parallel()
	b, err := devcerts.Generate(t.TempDir(), []string{"mantis.example", "10.0.0.7"})
	require.NoError(t, err)

	ca := readCert(t, b.CACert())
	require.Equal(t, "Mantis Dev CA", ca.Subject.CommonName)
	require.True(t, ca.IsCA)
	require.WithinDuration(t, time.Now().Add(10*365*24*time.Hour), ca.NotAfter, 48*time.Hour)
	require.Equal(t, elliptic.P256(), readKey(t, b.CAKey()).Curve)

	info, err := os.Stat(b.CAKey())
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), info.Mode().Perm())
	info, err = os.Stat(b.CACert())
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o644), info.Mode().Perm())

	server := x509.ExtKeyUsageServerAuth
	client := x509.ExtKeyUsageClientAuth
	want := map[string][]x509.ExtKeyUsage{
		"mandible": {server, client},
		"rabbitmq": {server},
		"thorax":   {server, client},
		"agent":    {server, client},
		"client":   {client},
	}
	require.ElementsMatch(t, []string{"mandible", "rabbitmq", "thorax", "agent", "client"}, devcerts.PairNames())

	for name, usages := range want {
		certPath, keyPath := b.Pair(name)
		cert := readCert(t, certPath)
		key := readKey(t, keyPath)
		require.Equal(t, elliptic.P256(), key.Curve, name)
		require.True(t, key.PublicKey.Equal(cert.PublicKey), name)
		require.ElementsMatch(t, usages, cert.ExtKeyUsage, name)

		for _, usage := range []x509.ExtKeyUsage{server, client} {
			_, err := cert.Verify(x509.VerifyOptions{Roots: roots(t, b), KeyUsages: []x509.ExtKeyUsage{usage}})
			if slices.Contains(usages, usage) {
				require.NoError(t, err, "%s for %v", name, usage)
			} else {
				require.Error(t, err, "%s must not verify for %v", name, usage)
			}
		}

		info, err := os.Stat(keyPath)
		require.NoError(t, err)
		require.Equal(t, os.FileMode(0o600), info.Mode().Perm(), name)
		info, err = os.Stat(certPath)
		require.NoError(t, err)
		require.Equal(t, os.FileMode(0o644), info.Mode().Perm(), name)

		if slices.Contains(usages, server) {
			for _, host := range []string{"mantis.example", "10.0.0.7", "localhost", "127.0.0.1", "::1", name} {
				require.NoError(t, cert.VerifyHostname(host), "%s for %s", name, host)
			}
			require.Error(t, cert.VerifyHostname("elsewhere.example"))
		}
	}

	clientCert, _ := b.Pair("client")
	require.Equal(t, "mantis", readCert(t, clientCert).Subject.CommonName)
}

func TestGenerateKeepsWhatIsValid(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	_, err := devcerts.Generate(dir, []string{"mantis.example"})
	require.NoError(t, err)
	before := snapshot(t, dir)

	_, err = devcerts.Generate(dir, []string{"mantis.example"})
	require.NoError(t, err)
	require.Equal(t, before, snapshot(t, dir))
}

func TestGenerateReplacesOnlyWhatIsMissing(t *testing.T) {
	t.Parallel()
	b, err := devcerts.Generate(t.TempDir(), nil)
	require.NoError(t, err)
	before := snapshot(t, b.Dir)

	_, thoraxKey := b.Pair("thorax")
	require.NoError(t, os.Remove(thoraxKey))
	_, err = devcerts.Generate(b.Dir, nil)
	require.NoError(t, err)

	after := snapshot(t, b.Dir)
	require.NotEqual(t, before["thorax.crt"], after["thorax.crt"])
	require.NotEqual(t, before["thorax.key"], after["thorax.key"])
	delete(before, "thorax.crt")
	delete(before, "thorax.key")
	delete(after, "thorax.crt")
	delete(after, "thorax.key")
	require.Equal(t, before, after)
}

// A pair that expires within 30 days is replaced; the rest stays.
func TestGenerateRenewsExpiringPair(t *testing.T) {
	t.Parallel()
	b, err := devcerts.Generate(t.TempDir(), nil)
	require.NoError(t, err)

	ca, caKey := readCert(t, b.CACert()), readKey(t, b.CAKey())
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	der, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{
		SerialNumber: big.NewInt(7),
		Subject:      pkix.Name{CommonName: "agent"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(10 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		DNSNames:     []string{"agent", "localhost"},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("::1")},
	}, ca, key.Public(), caKey)
	require.NoError(t, err)
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	require.NoError(t, err)
	certPath, keyPath := b.Pair("agent")
	require.NoError(t, os.WriteFile(certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644))
	require.NoError(t, os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600))
	before := snapshot(t, b.Dir)

	_, err = devcerts.Generate(b.Dir, nil)
	require.NoError(t, err)
	after := snapshot(t, b.Dir)
	require.NotEqual(t, before["agent.crt"], after["agent.crt"])
	require.Greater(t, time.Until(readCert(t, certPath).NotAfter), 365*24*time.Hour)
	require.Equal(t, before["mandible.crt"], after["mandible.crt"])
	require.Equal(t, before["ca.crt"], after["ca.crt"])
}

// Pairs not signed by the CA on disk are replaced, and so are server pairs
// that do not cover a newly requested host.
func TestGenerateReplacesForeignAndNarrowPairs(t *testing.T) {
	t.Parallel()
	b, err := devcerts.Generate(t.TempDir(), nil)
	require.NoError(t, err)
	before := snapshot(t, b.Dir)

	other, err := devcerts.Generate(t.TempDir(), nil)
	require.NoError(t, err)
	for _, f := range []string{"ca.crt", "ca.key"} {
		data, err := os.ReadFile(filepath.Join(other.Dir, f))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(b.Dir, f), data, 0o600))
	}
	_, err = devcerts.Generate(b.Dir, nil)
	require.NoError(t, err)
	after := snapshot(t, b.Dir)
	for _, name := range devcerts.PairNames() {
		require.NotEqual(t, before[name+".crt"], after[name+".crt"], name)
		cert, _ := b.Pair(name)
		_, err := readCert(t, cert).Verify(x509.VerifyOptions{Roots: roots(t, other), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}})
		require.NoError(t, err, name)
	}

	_, err = devcerts.Generate(b.Dir, []string{"new.example"})
	require.NoError(t, err)
	widened := snapshot(t, b.Dir)
	require.NotEqual(t, after["rabbitmq.crt"], widened["rabbitmq.crt"])
	require.Equal(t, after["client.crt"], widened["client.crt"])
	rabbitmq, _ := b.Pair("rabbitmq")
	require.NoError(t, readCert(t, rabbitmq).VerifyHostname("new.example"))
}

// A file that exists but cannot be read is an error, not a reason to
// replace the CA.
func TestGenerateStopsOnUnreadableFiles(t *testing.T) {
	t.Parallel()
	b, err := devcerts.Generate(t.TempDir(), nil)
	require.NoError(t, err)
	caKey, err := os.ReadFile(b.CAKey())
	require.NoError(t, err)
	// A directory where the certificate should be reads as an I/O error,
	// for root too.
	require.NoError(t, os.Remove(b.CACert()))
	require.NoError(t, os.Mkdir(b.CACert(), 0o755))

	_, err = devcerts.Generate(b.Dir, nil)
	require.ErrorContains(t, err, b.CACert())
	after, err := os.ReadFile(b.CAKey())
	require.NoError(t, err)
	require.Equal(t, caKey, after)
}

// handshake runs a mutual-TLS handshake over loopback between a server using
// the mandible pair and a client presenting clientCerts, and returns the
// server's error.
func handshake(t *testing.T, b devcerts.Bundle, clientCerts []tls.Certificate) error {
	t.Helper()
	serverPair, err := tls.LoadX509KeyPair(b.Pair("mandible"))
	require.NoError(t, err)
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{
		Certificates: []tls.Certificate{serverPair},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    roots(t, b),
		MinVersion:   tls.VersionTLS12,
	})
	require.NoError(t, err)
	defer ln.Close()

	serverErr := make(chan error, 1)
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			serverErr <- err
			return
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		if err := conn.(*tls.Conn).Handshake(); err != nil {
			serverErr <- err
			return
		}
		_, err = conn.Write([]byte("ok"))
		serverErr <- err
	}()

	conn, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{
		RootCAs:      roots(t, b),
		Certificates: clientCerts,
		ServerName:   "localhost",
		MinVersion:   tls.VersionTLS12,
	})
	if err == nil {
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		// With TLS 1.3 the client finishes first; the server's verdict on
		// its certificate arrives with the first read.
		buf := make([]byte, 2)
		_, readErr := io.ReadFull(conn, buf)
		if readErr == nil {
			require.Equal(t, "ok", string(buf))
		}
		conn.Close()
	}
	return <-serverErr
}

func TestMutualTLS(t *testing.T) {
	t.Parallel()
	b, err := devcerts.Generate(t.TempDir(), nil)
	require.NoError(t, err)
	other, err := devcerts.Generate(t.TempDir(), nil)
	require.NoError(t, err)

	clientPair, err := tls.LoadX509KeyPair(b.Pair("client"))
	require.NoError(t, err)
	thoraxPair, err := tls.LoadX509KeyPair(b.Pair("thorax"))
	require.NoError(t, err)
	foreignPair, err := tls.LoadX509KeyPair(other.Pair("client"))
	require.NoError(t, err)
	serverOnlyPair, err := tls.LoadX509KeyPair(b.Pair("rabbitmq"))
	require.NoError(t, err)

	require.NoError(t, handshake(t, b, []tls.Certificate{clientPair}))
	require.NoError(t, handshake(t, b, []tls.Certificate{thoraxPair}))
	require.ErrorContains(t, handshake(t, b, nil), "client didn't provide a certificate")
	require.ErrorContains(t, handshake(t, b, []tls.Certificate{foreignPair}), "certificate signed by unknown authority")
	require.ErrorContains(t, handshake(t, b, []tls.Certificate{serverOnlyPair}), "incompatible key usage")
}
