package thorax

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// A polling claim still in flight when the drain starts is not dropped: Mandible
// committed it, so Thorax waits for its answer and hands the claimed command back
// (at no attempt's cost) instead of leaving it held by an instance that stops.
func TestClaimInFlightWhenTheDrainStartsIsHandedBack(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.mandible.holdClaims = make(chan struct{})
	f.mandible.claimed = make(chan struct{}, 10)
	f.mandible.queue(listenCommand("cmd-in-flight", "127.0.0.1:1", 0))
	th := f.start(t)

	receive(t, f.mandible.claimed) // Mandible claimed it; its answer is held
	th.stop()                      // as SIGTERM does
	require.Eventually(t, th.book.isDraining, waitFor, 10e6)
	close(f.mandible.holdClaims)

	rel := receive(t, f.mandible.releases)
	require.Len(t, rel.GetCommands(), 1)
	require.Equal(t, commandID("cmd-in-flight"), rel.GetCommands()[0].GetCommandId())
	require.NoError(t, th.wait(t))
}

// A drain with nothing to wait for still ends only once Mandible has acknowledged a
// heartbeat saying the instance drains, so its listen targets move at once rather
// than when the instance is found silent.
func TestDrainEndsOnlyOnceMandibleHeardOfIt(t *testing.T) {
	t.Parallel()
	for range 5 {
		f := setup(t)
		th := f.start(t)
		th.stop()
		require.NoError(t, th.wait(t))
		heard := false
		for _, hb := range f.mandible.heartbeatList() {
			heard = heard || hb.GetDraining()
		}
		require.True(t, heard, "the instance stopped before Mandible heard of its drain")
	}
}
