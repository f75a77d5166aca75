package tlsconf_test

import (
	"context"
	"crypto/tls"
	"io"
	"log/slog"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/devcerts"
	"github.com/mantis-deploy/mantis/internal/identity"
	"github.com/mantis-deploy/mantis/internal/tlsconf"
)

// logRecorder is a slog handler that keeps the messages it is given.
type logRecorder struct {
	mu       sync.Mutex
	messages []string
}

func (l *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (l *logRecorder) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.messages = append(l.messages, r.Message)
	return nil
}
func (l *logRecorder) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logRecorder) WithGroup(string) slog.Handler      { return l }

func (l *logRecorder) count(message string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, m := range l.messages {
		if m == message {
			n++
		}
	}
	return n
}

// rotation is a CA and a server pair at fixed "live" paths, as a mounted Secret
// presents them, and the bundle that issues new pairs to put there.
type rotation struct {
	bundle devcerts.Bundle
	live   tlsconf.Files
	logs   *logRecorder
}

func setupRotation(t *testing.T) rotation {
	t.Helper()
	bundle, err := devcerts.Generate(filepath.Join(t.TempDir(), "issuer"), nil)
	require.NoError(t, err)
	live := t.TempDir()
	r := rotation{bundle: bundle, logs: &logRecorder{},
		live: tlsconf.Files{CA: filepath.Join(live, "ca.crt"), Cert: filepath.Join(live, "tls.crt"), Key: filepath.Join(live, "tls.key")}}
	r.live.Logger = slog.New(r.logs)
	copyFile(t, bundle.CACert(), r.live.CA)
	r.issue(t)
	return r
}

// issue issues a new server pair (a new serial number) and installs it at the live
// paths, returning its serial number.
func (r rotation) issue(t *testing.T) *big.Int {
	t.Helper()
	cert, _ := r.bundle.Issued(identity.RoleMandible, "m1")
	require.NoError(t, os.RemoveAll(cert))
	cert, key, err := r.bundle.Issue(identity.RoleMandible, "m1", nil)
	require.NoError(t, err)
	copyFile(t, key, r.live.Key)
	copyFile(t, cert, r.live.Cert)
	pair, err := tls.LoadX509KeyPair(cert, key)
	require.NoError(t, err)
	return pair.Leaf.SerialNumber
}

// copyFile replaces dst by src's content in one rename, as a renewal job does.
func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	require.NoError(t, err)
	tmp := dst + ".tmp"
	require.NoError(t, os.WriteFile(tmp, b, 0o600))
	require.NoError(t, os.Rename(tmp, dst))
}

// serve runs a TLS server with cfg that writes one byte to each client.
func serve(t *testing.T, cfg *tls.Config) string {
	t.Helper()
	l, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(5 * time.Second))
				_, _ = c.Write([]byte("k"))
			}()
		}
	}()
	return l.Addr().String()
}

// dialSerial connects with cfg, reads the server's byte, and returns the serial number
// of the server's certificate.
func dialSerial(addr string, cfg *tls.Config) (*big.Int, error) {
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, cfg)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadFull(c, make([]byte, 1)); err != nil {
		return nil, err
	}
	return c.ConnectionState().PeerCertificates[0].SerialNumber, nil
}

func clientConfig(t *testing.T, bundle devcerts.Bundle, caPath string) *tls.Config {
	t.Helper()
	cert, key, err := bundle.Issue(identity.RoleThorax, "t1", nil)
	require.NoError(t, err)
	cfg, err := tlsconf.Client(tlsconf.Files{CA: caPath, Cert: cert, Key: key}, "localhost")
	require.NoError(t, err)
	return cfg
}

func TestServerFollowsRotatedPairAndKeepsItWhenBroken(t *testing.T) {
	t.Parallel()
	r := setupRotation(t)
	serverCfg, err := tlsconf.Server(r.live)
	require.NoError(t, err)
	addr := serve(t, serverCfg)
	client := clientConfig(t, r.bundle, r.bundle.CACert())

	first, err := dialSerial(addr, client)
	require.NoError(t, err)

	second := r.issue(t)
	require.NotEqual(t, first, second)
	require.Eventually(t, func() bool {
		serial, err := dialSerial(addr, client)
		return err == nil && serial.Cmp(second) == 0
	}, 10*time.Second, 50*time.Millisecond, "a handshake after the rotation gets the new certificate")
	require.Equal(t, 1, r.logs.count("reloaded changed certificate files"))

	// A renewal that leaves a broken file keeps the pair that works.
	require.NoError(t, os.WriteFile(r.live.Cert, []byte("not a certificate"), 0o600))
	require.Eventually(t, func() bool {
		_, _ = dialSerial(addr, client)
		return r.logs.count("reloading changed certificate files failed, keeping the loaded ones") == 1
	}, 10*time.Second, 50*time.Millisecond)
	serial, err := dialSerial(addr, client)
	require.NoError(t, err)
	require.Equal(t, second, serial)
}

func TestServerFollowsChangedClientCABundle(t *testing.T) {
	t.Parallel()
	r := setupRotation(t)
	serverCfg, err := tlsconf.Server(r.live)
	require.NoError(t, err)
	serverCfg.VerifyConnection = func(tls.ConnectionState) error { return nil } // set after Server, as RequirePeerNames does
	addr := serve(t, serverCfg)

	// A client of a new CA, which the server does not trust yet.
	newCA, err := devcerts.Generate(filepath.Join(t.TempDir(), "new-ca"), nil)
	require.NoError(t, err)
	client := clientConfig(t, newCA, r.bundle.CACert())
	_, err = dialSerial(addr, client)
	require.Error(t, err, "a client certificate of an unknown CA is refused")

	// The bundle gains the new CA (both, while clients move over).
	oldPEM, err := os.ReadFile(r.bundle.CACert())
	require.NoError(t, err)
	newPEM, err := os.ReadFile(newCA.CACert())
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(r.live.CA+".tmp", []byte(string(oldPEM)+string(newPEM)), 0o600))
	require.NoError(t, os.Rename(r.live.CA+".tmp", r.live.CA))
	require.Eventually(t, func() bool {
		_, err := dialSerial(addr, client)
		return err == nil
	}, 10*time.Second, 50*time.Millisecond, "the new CA's client is accepted without a restart")

	old := clientConfig(t, r.bundle, r.bundle.CACert())
	_, err = dialSerial(addr, old)
	require.NoError(t, err, "the old CA's clients still are")
}

func TestClientPairFollowsItsFiles(t *testing.T) {
	t.Parallel()
	r := setupRotation(t)
	pair, err := tlsconf.LoadPair(r.live.Cert, r.live.Key, r.live.Logger)
	require.NoError(t, err)
	first := pair.Certificate().Leaf.SerialNumber

	second := r.issue(t)
	require.Eventually(t, func() bool {
		got, err := pair.GetClientCertificate(&tls.CertificateRequestInfo{})
		return err == nil && got.Leaf.SerialNumber.Cmp(second) == 0
	}, 10*time.Second, 50*time.Millisecond)
	require.NotEqual(t, first, second)

	require.NoError(t, os.Remove(r.live.Key))
	require.Eventually(t, func() bool {
		pair.Certificate()
		return r.logs.count("certificate files not readable, keeping the loaded ones") == 1
	}, 10*time.Second, 50*time.Millisecond)
	require.Equal(t, second, pair.Certificate().Leaf.SerialNumber, "a vanished key keeps the loaded pair")
}

func TestLoadPairNamesTheFiles(t *testing.T) {
	t.Parallel()
	_, err := tlsconf.LoadPair("/nonexistent/tls.crt", "/nonexistent/tls.key", nil)
	require.Error(t, err)
	require.True(t, strings.Contains(err.Error(), "/nonexistent/tls.crt"), err.Error())
}
