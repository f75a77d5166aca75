package agent

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/mantis-deploy/mantis/internal/config"
	"github.com/mantis-deploy/mantis/internal/devcerts"
	"github.com/mantis-deploy/mantis/internal/identity"
	"github.com/mantis-deploy/mantis/internal/tlsconf"
)

// A poll agent talks only to a Thorax: a server presenting another role's
// certificate from the same CA is refused at the handshake.
func TestPollAgentRefusesAServerThatIsNotThorax(t *testing.T) {
	b, err := devcerts.Generate(t.TempDir(), []string{"localhost", "127.0.0.1"})
	require.NoError(t, err)
	agentCert, agentKey, err := b.Issue(identity.RoleAgent, "web-1", []string{"localhost"})
	require.NoError(t, err)
	reg := prometheus.NewRegistry()
	metrics := identity.NewMetrics(reg)
	log := &lockedLog{}
	creds, err := ThoraxCredentials(config.Endpoint{TLS: config.TLS{CACertPath: b.CACert(), CertPath: agentCert, KeyPath: agentKey}},
		identity.HandshakeRefusals(identity.LinkThoraxAgents, slog.New(slog.NewTextHandler(log, nil)), metrics))
	require.NoError(t, err)

	serve := func(role identity.Role, name string) string {
		cert, key, err := b.Issue(role, name, []string{"localhost", "127.0.0.1"})
		require.NoError(t, err)
		tc, err := tlsconf.Server(tlsconf.Files{CA: b.CACert(), Cert: cert, Key: key})
		require.NoError(t, err)
		srv := grpc.NewServer(grpc.Creds(credentials.NewTLS(tc)))
		healthpb.RegisterHealthServer(srv, health.NewServer())
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		go func() { _ = srv.Serve(ln) }()
		t.Cleanup(srv.Stop)
		return ln.Addr().String()
	}
	check := func(addr string) error {
		conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
		require.NoError(t, err)
		defer conn.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err = healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
		return err
	}
	require.NoError(t, check(serve(identity.RoleThorax, "thorax-1")))
	err = check(serve(identity.RoleMandible, "mandible-1"))
	require.Error(t, err)
	require.Contains(t, err.Error(), "expected a thorax")
	// The agent logs and counts the refusal (gRPC may have tried more than once).
	require.Eventually(t, func() bool {
		return refusalCount(t, reg, identity.LinkThoraxAgents, "thorax", "mandible") >= 1
	}, 5*time.Second, 10*time.Millisecond)
	require.Contains(t, log.String(), "refused handshake for its identity")
	require.Contains(t, log.String(), "peer=mandible/mandible-1")
	require.Zero(t, refusalCount(t, reg, identity.LinkThoraxAgents, "thorax", "thorax"), "the real Thorax was no refusal")
}

// refusalCount is the refusal count of reg on link for expected and presented.
func refusalCount(t *testing.T, reg *prometheus.Registry, link, expected, presented string) float64 {
	t.Helper()
	families, err := reg.Gather()
	require.NoError(t, err)
	want := map[string]string{"link": link, "expected": expected, "presented": presented}
	for _, f := range families {
		if f.GetName() != identity.RefusalsMetric {
			continue
		}
		for _, m := range f.GetMetric() {
			match := len(m.GetLabel()) == len(want)
			for _, l := range m.GetLabel() {
				match = match && want[l.GetName()] == l.GetValue()
			}
			if match {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// lockedLog is a log a handshake may write while the test reads it.
type lockedLog struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}
