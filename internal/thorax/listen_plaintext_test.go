package thorax

import (
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"

	"github.com/mantis-deploy/mantis/internal/config"
	mantisv1 "github.com/mantis-deploy/mantis/proto/mantis/v1"
)

// nonLoopbackIP returns an address of one of the host's interfaces that is not
// loopback, or skips the test on a host without one.
func nonLoopbackIP(t *testing.T) string {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	require.NoError(t, err)
	for _, a := range addrs {
		if ipNet, ok := a.(*net.IPNet); ok && !ipNet.IP.IsLoopback() && ipNet.IP.To4() != nil {
			return ipNet.IP.String()
		}
	}
	t.Skip("no interface address off loopback")
	return ""
}

// With agents.insecure (plaintext, no identities) Thorax calls listen agents on
// loopback only: a command for a listen address off loopback never leaves in
// clear; it goes back to Mandible naming the switch that would allow it. The
// same agent reached on loopback gets its command. agents.insecure_allow_remote
// lets the call through.
func TestThoraxCallsPlaintextListenAgentsOnLoopbackOnly(t *testing.T) {
	t.Parallel()
	remote := nonLoopbackIP(t)
	for _, allowRemote := range []bool{false, true} {
		f := setup(t)
		f.cfg.Agents.TLS = config.TLS{Insecure: true, InsecureAllowRemote: allowRemote}
		require.NoError(t, f.cfg.Validate())
		a := &fakeAgent{calls: make(chan agentCall, 100), cancels: make(chan string, 100), cancelled: make(chan struct{})}
		server := grpc.NewServer()
		mantisv1.RegisterAgentServiceServer(server, a)
		ln, err := net.Listen("tcp", "0.0.0.0:0")
		require.NoError(t, err)
		go func() { _ = server.Serve(ln) }()
		t.Cleanup(server.Stop)
		port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
		f.mandible.redispatchAnswer = &mantisv1.ScheduleRedispatchResponse{Scheduled: true}
		f.mandible.queue(listenCommand("cmd-remote", net.JoinHostPort(remote, port), 1))
		th := f.start(t)

		if allowRemote {
			require.Equal(t, commandID("cmd-remote"), receive(t, a.calls).cmd.GetId(), "insecure_allow_remote lets the call through")
			require.Equal(t, commandID("cmd-remote"), receive(t, f.mandible.stored).GetCommandId())
			continue
		}
		select {
		case call := <-a.calls:
			require.FailNow(t, "a plaintext call left loopback", "command %s was sent in clear to %s", call.cmd.GetId(), remote)
		case r := <-f.mandible.redispatches:
			require.Equal(t, commandID("cmd-remote"), r.GetCommandId())
			require.Contains(t, r.GetReason(), "not a loopback address, and agents.insecure_allow_remote is not set")
		case <-time.After(waitFor):
			require.FailNow(t, "the command was neither refused nor handed to anyone")
		}
		f.mandible.queue(listenCommand("cmd-loopback", net.JoinHostPort("127.0.0.1", port), 2))
		require.Equal(t, commandID("cmd-loopback"), receive(t, a.calls).cmd.GetId())
		require.Equal(t, commandID("cmd-loopback"), receive(t, f.mandible.stored).GetCommandId())
		require.Eventually(t, func() bool { return len(th.book.remaining()) == 0 }, waitFor, 10*time.Millisecond)
		require.Empty(t, a.calls)
	}
}
