package devstack

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

// stunnelPackage is the Debian package of the TLS terminator tests put in front of the
// Temporal dev server, which serves plain gRPC only.
const stunnelPackage = "stunnel4"

// FindStunnel returns the stunnel binary. It installs nothing: Install with
// Options.TestPackages does, before the tests start.
func FindStunnel() (string, error) {
	return findInstalled(stunnelDeb)
}

// TLSTerminator is a running stunnel that accepts TLS on Address, requires a client
// certificate signed by its CA, and forwards the plain stream to its backend.
type TLSTerminator struct {
	Address string
	cmd     *exec.Cmd
	done    chan struct{}
}

// TLSTerminatorOptions describe a TLSTerminator.
type TLSTerminatorOptions struct {
	// Dir holds its configuration and log.
	Dir string
	// Backend is the plain host:port it forwards to.
	Backend string
	// CertPath and KeyPath are its server pair; CACertPath signs the client pairs it
	// accepts. Without CACertPath, clients present no certificate (the backend
	// authenticates them, by a bearer token say).
	CertPath, KeyPath, CACertPath string
}

// StartTLSTerminator starts stunnel in front of opts.Backend and waits until it accepts
// connections.
func StartTLSTerminator(ctx context.Context, logger *slog.Logger, opts TLSTerminatorOptions) (*TLSTerminator, error) {
	bin, err := FindStunnel()
	if err != nil {
		return nil, err
	}
	port, err := FreePort(false)
	if err != nil {
		return nil, err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	conf := fmt.Sprintf(`foreground = yes
pid =
debug = notice
output = %s

[temporal]
accept = %s
connect = %s
cert = %s
key = %s
sslVersionMin = TLSv1.2
`, filepath.Join(opts.Dir, "stunnel.log"), addr, opts.Backend, opts.CertPath, opts.KeyPath)
	if opts.CACertPath != "" {
		conf += fmt.Sprintf("CAfile = %s\nverifyChain = yes\nrequireCert = yes\n", opts.CACertPath)
	}
	path := filepath.Join(opts.Dir, "stunnel.conf")
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		return nil, fmt.Errorf("writing stunnel configuration: %w", err)
	}
	cmd := exec.Command(bin, path)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting stunnel: %w", err)
	}
	t := &TLSTerminator{Address: addr, cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(t.done) }()
	deadline := time.Now().Add(15 * time.Second)
	for {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			conn.Close()
			return t, nil
		}
		select {
		case <-t.done:
			return nil, fmt.Errorf("stunnel exited: see %s", filepath.Join(opts.Dir, "stunnel.log"))
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Stop()
			return nil, fmt.Errorf("stunnel did not accept on %s within 15s", addr)
		}
	}
}

// Stop ends the terminator.
func (t *TLSTerminator) Stop() {
	_ = t.cmd.Process.Kill()
	<-t.done
}
