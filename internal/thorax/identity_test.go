package thorax

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/mantis-deploy/mantis/internal/identity"
	mantisv1 "github.com/mantis-deploy/mantis/proto/mantis/v1"
)

// gathered returns the value of the named metric with exactly labels; 0 if none.
func gathered(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	families, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			match := len(m.GetLabel()) == len(labels)
			for _, l := range m.GetLabel() {
				match = match && labels[l.GetName()] == l.GetValue()
			}
			if match {
				return m.GetCounter().GetValue() + m.GetGauge().GetValue()
			}
		}
	}
	return 0
}

// Only the agent role may call the agents server: a Thorax's certificate, a
// CLI's or Mandible's is refused, naming the role expected and the one presented.
func TestAgentsServerRefusesOtherRoles(t *testing.T) {
	t.Parallel()
	f := setup(t)
	th := f.start(t)
	for _, caller := range []identity.ID{
		{Role: identity.RoleThorax, Name: "thorax-2"},
		{Role: identity.RoleClient, Name: "web-poll"},
		{Role: identity.RoleMandible, Name: "web-poll"},
	} {
		c := f.clientAs(t, th, caller.Role, caller.Name)
		_, err := c.PollCommands(t.Context(), poll("web-poll", 1, 0))
		require.Equal(t, codes.PermissionDenied, status.Code(err), "%v", err)
		require.Equal(t, "agent role required, certificate presents "+caller.String(), status.Convert(err).Message())
		_, err = c.ReportResult(t.Context(), &mantisv1.ReportResultRequest{
			Target: "web-poll", CommandId: commandID("c"), Result: &mantisv1.CommandResult{},
		})
		require.Equal(t, codes.PermissionDenied, status.Code(err), "%v", err)
		require.Equal(t, 2.0, gathered(t, th.Registry(), identity.RefusalsMetric, map[string]string{
			"link": identity.LinkThoraxAgents, "expected": "agent", "presented": string(caller.Role),
		}))
	}
	require.Empty(t, th.book.connectedTargets(time.Now()), "no refused poll connected its target")
}

// An agent polls and reports only for its own target: the one its certificate
// names.
func TestAgentActsOnlyForItsOwnTarget(t *testing.T) {
	t.Parallel()
	f := setup(t)
	th := f.start(t)
	web1 := f.pollClientFor(t, th, "web-1")

	_, err := web1.PollCommands(t.Context(), poll("web-2", 1, 0))
	require.Equal(t, codes.PermissionDenied, status.Code(err), "%v", err)
	require.Equal(t, `target "web-2" requires certificate agent/web-2, certificate presents agent/web-1`, status.Convert(err).Message())
	require.NotContains(t, th.book.connectedTargets(time.Now()), "web-2")

	// web-2's command, handed to web-2's own agent, cannot be reported by web-1.
	_, err = f.pollClientFor(t, th, "web-2").PollCommands(t.Context(), poll("web-2", 1, 0))
	require.NoError(t, err)
	f.mandible.queue(pollCommand("cmd-web-2", "web-2", 1))
	web2 := f.pollClientFor(t, th, "web-2")
	var got *mantisv1.PollCommandsResponse
	require.Eventually(t, func() bool {
		got, err = web2.PollCommands(t.Context(), poll("web-2", 1, 0))
		return err == nil && len(got.GetCommands()) == 1
	}, waitFor, 10*time.Millisecond)
	_, err = web1.ReportResult(t.Context(), &mantisv1.ReportResultRequest{
		Target: "web-2", CommandId: commandID("cmd-web-2"), LeaseEpoch: 1, Result: &mantisv1.CommandResult{ExitCode: 0},
	})
	require.Equal(t, codes.PermissionDenied, status.Code(err), "%v", err)
	require.Equal(t, 2.0, gathered(t, th.Registry(), identity.RefusalsMetric, map[string]string{
		"link": identity.LinkThoraxAgents, "expected": identity.BindingTarget, "presented": "other",
	}))
	select {
	case s := <-f.mandible.stored:
		t.Fatalf("a refused report reached mandible: %v", s)
	default:
	}

	// Its own agent reports it.
	_, err = web2.ReportResult(t.Context(), &mantisv1.ReportResultRequest{
		Target: "web-2", CommandId: commandID("cmd-web-2"), LeaseEpoch: 1, Result: &mantisv1.CommandResult{ExitCode: 0},
	})
	require.NoError(t, err)
	stored := receive(t, f.mandible.stored)
	require.Equal(t, commandID("cmd-web-2"), stored.GetCommandId())
	require.Equal(t, "web-2", stored.GetTarget(), "Mandible is told whose agent reported it")
}

// The instance exports its own certificate's expiry.
func TestThoraxExportsItsCertificateExpiry(t *testing.T) {
	t.Parallel()
	f := setup(t)
	th := f.start(t)
	c, err := identity.ReadCertificate(f.cfg.Agents.TLS.CertPath)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		return gathered(t, th.Registry(), identity.ExpiryMetric, map[string]string{"role": "thorax", "name": "thorax"}) == float64(c.NotAfter.Unix())
	}, waitFor, 10*time.Millisecond)
}
