package tlsconf_test

import (
	"bytes"
	"crypto/tls"
	"log/slog"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/devcerts"
	"github.com/mantis-deploy/mantis/internal/identity"
	"github.com/mantis-deploy/mantis/internal/tlsconf"
)

// Each handshake a peer check refuses reaches its hook, which logs it and counts
// it in mantis_auth_refusals_total; a handshake it admits reaches no hook.
func TestPeerChecksReportEachRefusal(t *testing.T) {
	t.Parallel()
	b, err := devcerts.Generate(t.TempDir(), []string{"localhost"})
	require.NoError(t, err)
	pair := func(role identity.Role, name string) tlsconf.Files {
		cert, key, err := b.Issue(role, name, []string{"localhost"})
		require.NoError(t, err)
		return tlsconf.Files{CA: b.CACert(), Cert: cert, Key: key}
	}
	reg := prometheus.NewRegistry()
	metrics := identity.NewMetrics(reg)
	var log bytes.Buffer
	hook := identity.HandshakeRefusals("test_link", slog.New(slog.NewTextHandler(&log, nil)), metrics)
	var heard []identity.HandshakeRefusal
	record := func(r identity.HandshakeRefusal) { heard = append(heard, r) }

	// A server that admits only the client named thorax-1.
	server, err := tlsconf.Server(pair(identity.RoleAgent, "web-1"))
	require.NoError(t, err)
	tlsconf.RequirePeerNames(server, []string{"thorax-1"}, hook, record)
	client := func(f tlsconf.Files) *tls.Config {
		cfg, err := tlsconf.Client(f, "localhost")
		require.NoError(t, err)
		return cfg
	}
	require.NoError(t, handshake(t, server, client(pair(identity.RoleThorax, "thorax-1"))))
	require.Empty(t, heard, "an admitted peer is no refusal")
	require.Error(t, handshake(t, server, client(pair(identity.RoleThorax, "thorax-2"))))
	require.Error(t, handshake(t, server, client(pair(identity.RoleMandible, "mandible-1"))))
	require.Len(t, heard, 2)
	require.Equal(t, identity.HandshakeRefusal{Expected: identity.ExpectedAllowedName, Presented: "thorax",
		Peer: "thorax/thorax-2", Err: heard[0].Err}, heard[0])
	require.ErrorContains(t, heard[0].Err, `names none of ["thorax-1"]`)

	// A client that talks only to a Mandible.
	mandibleClient := client(pair(identity.RoleThorax, "thorax-1"))
	tlsconf.RequirePeerRole(mandibleClient, identity.RoleMandible, hook, record)
	agentServer, err := tlsconf.Server(pair(identity.RoleAgent, "web-1"))
	require.NoError(t, err)
	require.ErrorContains(t, clientHandshake(t, agentServer, mandibleClient), "expected a mandible")
	require.Len(t, heard, 3)
	require.Equal(t, "mandible", heard[2].Expected)
	require.Equal(t, "agent", heard[2].Presented)

	require.Equal(t, 1.0, counted(t, reg, identity.ExpectedAllowedName, "thorax"))
	require.Equal(t, 1.0, counted(t, reg, identity.ExpectedAllowedName, "mandible"))
	require.Equal(t, 1.0, counted(t, reg, "mandible", "agent"))
	require.Equal(t, 3, bytes.Count(log.Bytes(), []byte(`msg="refused handshake for its identity" link=test_link stage=handshake`)))
	require.Contains(t, log.String(), `peer=thorax/thorax-2`)
}

// counted is the refusal count on test_link for expected and presented.
func counted(t *testing.T, reg *prometheus.Registry, expected, presented string) float64 {
	t.Helper()
	families, err := reg.Gather()
	require.NoError(t, err)
	want := map[string]string{"link": "test_link", "expected": expected, "presented": presented}
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
