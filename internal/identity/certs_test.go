package identity_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/devcerts"
)

// legacyPair writes a client pair signed by the bundle's CA, named "legacy",
// without a URI SAN, as pairs were before identities.
func legacyPair(t *testing.T, certs devcerts.Bundle) (cert, key string) {
	t.Helper()
	return signedPair(t, certs, "legacy", time.Now().Add(365*24*time.Hour))
}

// signedPair writes a client pair signed by the bundle's CA with the given common
// name and expiry, and no URI SAN.
func signedPair(t *testing.T, certs devcerts.Bundle, cn string, notAfter time.Time) (cert, key string) {
	t.Helper()
	ca, err := tls.LoadX509KeyPair(certs.CACert(), certs.CAKey())
	require.NoError(t, err)
	caCert, err := x509.ParseCertificate(ca.Certificate[0])
	require.NoError(t, err)
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	der, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, caCert, k.Public(), ca.PrivateKey)
	require.NoError(t, err)
	keyDER, err := x509.MarshalPKCS8PrivateKey(k)
	require.NoError(t, err)
	cert, key = filepath.Join(certs.Dir, cn+".crt"), filepath.Join(certs.Dir, cn+".key")
	require.NoError(t, os.WriteFile(cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644))
	require.NoError(t, os.WriteFile(key, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600))
	return cert, key
}
