package thorax

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	"github.com/mantis-deploy/mantis/internal/identity"
	mantisv1 "github.com/mantis-deploy/mantis/proto/mantis/v1"
)

// Thorax hands a listen command only to an agent: a server at the command's
// listen address presenting Mandible's certificate (or a Thorax's), from the same
// CA, is refused at the handshake. The command never reaches it; Thorax asks
// Mandible for another dispatch naming the refusal, and logs and counts it.
func TestThoraxRefusesAListenAgentOfAnotherRole(t *testing.T) {
	t.Parallel()
	f := setup(t)
	impostors := map[string]*fakeAgent{"mandible": {}, "thorax": {}}
	addrs := map[string]string{}
	for pair, a := range impostors {
		a.calls = make(chan agentCall, 100)
		a.cancels = make(chan string, 100)
		a.cancelled = make(chan struct{})
		addrs[pair] = serve(t, f.certs, pair, func(s *grpc.Server) { mantisv1.RegisterAgentServiceServer(s, a) })
	}
	genuine := &fakeAgent{}
	genuineAddr := f.startAgent(t, genuine)
	f.mandible.redispatchAnswer = &mantisv1.ScheduleRedispatchResponse{Scheduled: true}
	f.mandible.queue(listenCommand("cmd-to-mandible", addrs["mandible"], 1),
		listenCommand("cmd-to-thorax", addrs["thorax"], 2), listenCommand("cmd-to-agent", genuineAddr, 3))
	th := f.start(t)

	got := map[string]*mantisv1.ScheduleRedispatchRequest{}
	for range 2 {
		r := receive(t, f.mandible.redispatches)
		got[r.GetCommandId()] = r
	}
	for pair, want := range map[string]string{"mandible": "mandible/mandible", "thorax": "thorax/thorax"} {
		r := got[commandID("cmd-to-"+pair)]
		require.NotNil(t, r, "the command sent to a %s certificate is given back", pair)
		require.Contains(t, r.GetReason(), codes.Unavailable.String())
		require.Contains(t, r.GetReason(), "is "+want+", expected a agent", "the reason names both roles")
		require.Empty(t, impostors[pair].calls, "the %s certificate's server received no command", pair)
		require.GreaterOrEqual(t, gathered(t, th.Registry(), identity.RefusalsMetric, map[string]string{
			"link": identity.LinkListenAgent, "expected": "agent", "presented": pair,
		}), 1.0, "the refusal of the %s certificate is counted", pair)
	}

	// The agent of the CA with the agent role gets its command and the result is stored.
	require.Equal(t, commandID("cmd-to-agent"), receive(t, genuine.calls).cmd.GetId())
	require.Equal(t, commandID("cmd-to-agent"), receive(t, f.mandible.stored).GetCommandId())
	require.Eventually(t, func() bool { return len(th.book.remaining()) == 0 }, waitFor, 10*time.Millisecond)
}

// Thorax hands a listen command only to the agent of the command's own target:
// an agent of the CA presenting the certificate of target web-other, answering
// at the address registered for web-listen (a mistyped address, a host that
// moved, or a stolen agent pair), is refused at the handshake. It never sees
// the command; Thorax asks Mandible for another dispatch with a reason naming
// the target called and the identity presented, and logs and counts the
// refusal. The agent of web-listen at another address gets its command.
func TestThoraxRefusesAListenAgentOfAnotherTarget(t *testing.T) {
	t.Parallel()
	f := setup(t)
	impostor := &fakeAgent{}
	impostorAddr := f.startAgentAs(t, impostor, "web-other")
	genuine := &fakeAgent{}
	genuineAddr := f.startAgent(t, genuine)
	f.mandible.redispatchAnswer = &mantisv1.ScheduleRedispatchResponse{Scheduled: true}
	f.mandible.queue(listenCommand("cmd-to-other", impostorAddr, 1), listenCommand("cmd-to-own", genuineAddr, 2))
	th := f.start(t)

	var r *mantisv1.ScheduleRedispatchRequest
	select {
	case call := <-impostor.calls:
		require.FailNow(t, "the agent of another target received the command",
			"agent/web-other was handed command %s of target %s", call.cmd.GetId(), call.cmd.GetTarget())
	case r = <-f.mandible.redispatches:
	case <-time.After(waitFor):
		require.FailNow(t, "the command was neither refused nor handed to anyone")
	}
	require.Equal(t, commandID("cmd-to-other"), r.GetCommandId())
	require.Contains(t, r.GetReason(), codes.Unavailable.String())
	require.Contains(t, r.GetReason(), "listen agent web-listen at "+impostorAddr, "the reason names the target called")
	require.Contains(t, r.GetReason(), "is agent/web-other, expected agent/web-listen", "and the identity presented")
	require.Empty(t, impostor.calls, "the agent of another target received no command")
	require.GreaterOrEqual(t, gathered(t, th.Registry(), identity.RefusalsMetric, map[string]string{
		"link": identity.LinkListenAgent, "expected": identity.BindingTarget, "presented": "agent",
	}), 1.0, "the refusal is counted")

	require.Equal(t, commandID("cmd-to-own"), receive(t, genuine.calls).cmd.GetId())
	require.Equal(t, commandID("cmd-to-own"), receive(t, f.mandible.stored).GetCommandId())
	require.Eventually(t, func() bool { return len(th.book.remaining()) == 0 }, waitFor, 10*time.Millisecond)
	require.Empty(t, impostor.calls)
}
