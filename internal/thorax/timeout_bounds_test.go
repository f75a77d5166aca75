package thorax

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/durationpb"
)

// A command whose timeout is near MaxInt64 (Mandible refuses more than a day, but an
// older or a hostile one may send it) is still handed to its listen agent with a
// deadline in the future: the wait, timeout plus grace, is clamped instead of
// overflowing into the past and redispatching the command at once.
func TestHugeCommandTimeoutIsClampedNotOverflowed(t *testing.T) {
	t.Parallel()
	f := setup(t)
	agent := &fakeAgent{block: make(chan struct{})}
	agentAddr := f.startAgent(t, agent)
	cmd := listenCommand("cmd-forever", agentAddr, 1)
	cmd.Timeout = durationpb.New(time.Duration(math.MaxInt64))
	f.mandible.queue(cmd)
	th := f.start(t)

	select {
	case call := <-agent.calls:
		require.Equal(t, commandID("cmd-forever"), call.cmd.GetId())
	case req := <-f.mandible.redispatches:
		require.FailNow(t, "the command was redispatched instead of handed to its agent", "reason: %s", req.GetReason())
	case <-time.After(waitFor):
		require.FailNow(t, "the agent was never called")
	}
	wait := th.resultWait(cmd)
	require.Positive(t, wait)
	require.LessOrEqual(t, wait, maxCommandTimeout+resultGrace)
	close(agent.block)
	require.Equal(t, commandID("cmd-forever"), receive(t, f.mandible.stored).GetCommandId())
}
