// Package tlsconf turns the certificate paths of a config section into crypto/tls
// configurations: mutual TLS on every gRPC link, and the broker's client side. The
// certificate pairs, and a server's client CAs, are re-read when their files change.
package tlsconf

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"os"
)

// Files names a CA and this process's own certificate pair.
type Files struct {
	CA, Cert, Key string
	// Logger hears of reloads of the files; nil is slog's default.
	Logger *slog.Logger
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
// The pair and the CA bundle follow their files: a handshake after they change on
// disk uses the new ones (see ReloadCheckInterval), and a change that does not load
// keeps the previous ones. It offers ALPN "h2" (the gRPC servers it is made for).
func Server(f Files) (*tls.Config, error) {
	if f.Cert == "" && f.Key == "" {
		return nil, fmt.Errorf("server certificate pair: missing")
	}
	pool, err := LoadPool(f.CA, f.Logger)
	if err != nil {
		return nil, err
	}
	pair, err := LoadPair(f.Cert, f.Key, f.Logger)
	if err != nil {
		return nil, err
	}
	base := &tls.Config{
		GetCertificate: pair.GetCertificate,
		ClientCAs:      pool.CertPool(),
		ClientAuth:     tls.RequireAndVerifyClientCert,
		MinVersion:     tls.VersionTLS12,
		NextProtos:     []string{"h2"},
	}
	// The client CAs have no per-handshake hook of their own: while the bundle is
	// the one loaded first, the handshake goes on with the configuration it started
	// with (gRPC's copy of base, say); once it changed, with a copy of base (and of
	// what was added to base since, as RequirePeerNames' check) that trusts the new
	// bundle.
	first := base.ClientCAs
	base.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
		cas := pool.CertPool()
		if cas == first {
			return nil, nil
		}
		c := base.Clone()
		c.GetConfigForClient = nil
		c.ClientCAs = cas
		return c, nil
	}
	return base, nil
}

// Client is a client configuration that verifies the server against f.CA and, when a
// pair is named, presents it. The pair follows its files as Server's does; the CA
// bundle is read once (Go verifies a server before any hook could swap it), so a CA
// rotation gives clients a bundle holding both CAs first.
func Client(f Files, serverName string) (*tls.Config, error) {
	pool, err := loadPool(f.CA)
	if err != nil {
		return nil, err
	}
	c := &tls.Config{
		RootCAs:    pool,
		ServerName: serverName,
		MinVersion: tls.VersionTLS12,
	}
	if f.Cert != "" || f.Key != "" {
		pair, err := LoadPair(f.Cert, f.Key, f.Logger)
		if err != nil {
			return nil, err
		}
		c.GetClientCertificate = pair.GetClientCertificate
	}
	return c, nil
}
