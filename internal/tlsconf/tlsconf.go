// Package tlsconf turns the certificate paths of a config section into crypto/tls
// configurations: mutual TLS on every gRPC link, and the broker's client side.
package tlsconf

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
)

// Files names a CA and this process's own certificate pair.
type Files struct {
	CA, Cert, Key string
}

func loadPool(path string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading CA certificate: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("CA certificate %s: no PEM certificate found", path)
	}
	return pool, nil
}

func loadPair(cert, key string) ([]tls.Certificate, error) {
	if cert == "" && key == "" {
		return nil, nil
	}
	pair, err := tls.LoadX509KeyPair(cert, key)
	if err != nil {
		return nil, fmt.Errorf("loading certificate pair %s, %s: %w", cert, key, err)
	}
	return []tls.Certificate{pair}, nil
}

// Server is a server configuration that demands a client certificate signed by f.CA.
func Server(f Files) (*tls.Config, error) {
	pool, err := loadPool(f.CA)
	if err != nil {
		return nil, err
	}
	certs, err := loadPair(f.Cert, f.Key)
	if err != nil {
		return nil, err
	}
	if certs == nil {
		return nil, fmt.Errorf("server certificate pair: missing")
	}
	return &tls.Config{
		Certificates: certs,
		ClientCAs:    pool,
		ClientAuth:   tls.RequireAndVerifyClientCert,
		MinVersion:   tls.VersionTLS12,
	}, nil
}

// Client is a client configuration that verifies the server against f.CA and, when a
// pair is named, presents it.
func Client(f Files, serverName string) (*tls.Config, error) {
	pool, err := loadPool(f.CA)
	if err != nil {
		return nil, err
	}
	certs, err := loadPair(f.Cert, f.Key)
	if err != nil {
		return nil, err
	}
	return &tls.Config{
		RootCAs:      pool,
		Certificates: certs,
		ServerName:   serverName,
		MinVersion:   tls.VersionTLS12,
	}, nil
}
