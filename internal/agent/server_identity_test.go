package agent_test

import (
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/agent"
	"github.com/mantis-deploy/mantis/internal/config"
	"github.com/mantis-deploy/mantis/internal/devcerts"
	"github.com/mantis-deploy/mantis/internal/identity"
	mantisv1 "github.com/mantis-deploy/mantis/proto/mantis/v1"
)

// refusals returns the listen agent's refusal count for the presented role.
func refusals(t *testing.T, reg *prometheus.Registry, presented string) float64 {
	t.Helper()
	return refusalsOf(t, reg, identity.LinkListenAgent, "thorax", presented)
}

// refusalsOf returns the refusal count on link for expected and presented.
func refusalsOf(t *testing.T, reg *prometheus.Registry, link, expected, presented string) float64 {
	t.Helper()
	families, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() != identity.RefusalsMetric {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["link"] == link && labels["expected"] == expected && labels["presented"] == presented {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// listen.allowed_client_names narrows the Thorax certificates accepted to the
// names listed, by the name of their identity: another Thorax's is refused at
// the handshake.
func TestListenAllowedClientNamesMatchIdentityNames(t *testing.T) {
	t.Parallel()
	certs, err := devcerts.Generate(t.TempDir(), nil)
	require.NoError(t, err)
	cert, key, err := certs.Issue(identity.RoleAgent, "web-1", nil)
	require.NoError(t, err)
	lc := config.DefaultAgent().Listen
	lc.TLS = config.TLS{CACertPath: certs.CACert(), CertPath: cert, KeyPath: key}
	lc.AllowedClientNames = []string{"thorax-1"}
	reg := prometheus.NewRegistry()
	log := &syncBuffer{}
	creds, err := agent.ListenCredentials(lc, identity.HandshakeRefusals(identity.LinkListenAgent,
		slog.New(slog.NewTextHandler(log, nil)), identity.NewMetrics(reg)))
	require.NoError(t, err)
	runner := agent.NewRunner(execConfig(nil), openJournal(t, t.TempDir(), nil), testLogger(t))
	gs := agent.NewGRPCServer(agent.NewServer("web-1", runner, testLogger(t)), creds)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(gs.Stop)
	addr := lis.Addr().String()

	t1Cert, t1Key, err := certs.Issue(identity.RoleThorax, "thorax-1", nil)
	require.NoError(t, err)
	t2Cert, t2Key, err := certs.Issue(identity.RoleThorax, "thorax-2", nil)
	require.NoError(t, err)
	require.NoError(t, tlsHandshake(t, addr, certs.CACert(), t1Cert, t1Key))
	require.ErrorContains(t, tlsHandshake(t, addr, certs.CACert(), t2Cert, t2Key), "remote error: tls: ")
	// The refusal is logged and counted, not only felt by the client.
	require.Eventually(t, func() bool {
		return refusalsOf(t, reg, identity.LinkListenAgent, identity.ExpectedAllowedName, "thorax") == 1
	}, 5*time.Second, 10*time.Millisecond)
	require.Contains(t, log.String(), "refused handshake for its identity")
	require.Contains(t, log.String(), "peer=thorax/thorax-2")

	client, _ := dial(t, addr, certs.CACert(), t1Cert, t1Key)
	_, err = client.CancelCommand(callCtx(t), &mantisv1.CancelCommandRequest{CommandId: "x"})
	require.ErrorContains(t, err, "not running", "thorax-1 gets through to the service")
}
