package main

import (
	"crypto/tls"
	"log/slog"
	"math/big"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/config"
	"github.com/mantis-deploy/mantis/internal/devcerts"
	"github.com/mantis-deploy/mantis/internal/identity"
)

// The API's HTTPS listener serves a pair renewed on disk from the next handshake on.
func TestHTTPSListenerServesARenewedPair(t *testing.T) {
	t.Parallel()
	certs, err := devcerts.Generate(filepath.Join(t.TempDir(), "certs"), nil)
	require.NoError(t, err)
	live := t.TempDir()
	cfg := config.HTTP{Listen: "127.0.0.1:0", CertPath: filepath.Join(live, "tls.crt"), KeyPath: filepath.Join(live, "tls.key")}
	install := func() *big.Int {
		cert, _ := certs.Issued(identity.RoleMandible, "api")
		require.NoError(t, os.RemoveAll(cert))
		cert, key, err := certs.Issue(identity.RoleMandible, "api", nil)
		require.NoError(t, err)
		for src, dst := range map[string]string{key: cfg.KeyPath, cert: cfg.CertPath} {
			b, err := os.ReadFile(src)
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(dst+".tmp", b, 0o600))
			require.NoError(t, os.Rename(dst+".tmp", dst))
		}
		pair, err := tls.LoadX509KeyPair(cert, key)
		require.NoError(t, err)
		return pair.Leaf.SerialNumber
	}
	first := install()
	l, err := listenHTTP(cfg, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() { _ = c.(*tls.Conn).Handshake(); c.Close() }()
		}
	}()
	serial := func() *big.Int {
		c, err := tls.Dial("tcp", l.Addr().String(), &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // the test reads the serial only
		if err != nil {
			return nil
		}
		defer c.Close()
		return c.ConnectionState().PeerCertificates[0].SerialNumber
	}
	require.Equal(t, first, serial())

	second := install()
	require.Eventually(t, func() bool { s := serial(); return s != nil && s.Cmp(second) == 0 },
		10*time.Second, 50*time.Millisecond, "the renewed pair is served without a restart")
}
