package sse

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/contract/events"
)

// A stream resuming far back with a target filter that matches almost nothing would
// read the whole log to find it. A replay is bounded by ids instead: resuming more
// than MaxReplay ids back gets a reset event first, whose id is MaxReplay before the
// log's position, and only the events after it are read; resuming within the bound
// replays without a reset.
func TestReplayFromTooFarBackIsBoundedByAReset(t *testing.T) {
	t.Parallel()
	const maxReplay = 10
	b := setup(t, setupOptions{handler: HandlerOptions{MaxReplay: maxReplay}})
	first := b.insert(t, &b.a, "target.finished", map[string]any{"target": "web-1"})
	for range 3 * maxReplay {
		b.insert(t, &b.a, "target.finished", map[string]any{"target": "web-1"})
	}
	wanted := b.insert(t, &b.a, "target.finished", map[string]any{"target": "web-9"})
	require.Eventually(t, func() bool {
		through, err := b.broker.position(b.ctx)
		return err == nil && through >= wanted
	}, waitFor, 10*time.Millisecond, "the broker reading the log up to the last event")

	c := b.open(t, "/sse/events?target=web-9", openOptions{lastEventID: strconv.FormatInt(first, 10)}).start()
	got := c.until(t, wanted)
	require.Len(t, got, 2, "a reset, then the one event the filter keeps: %+v", got)
	require.Equal(t, string(events.Reset), got[0].typ, "the first event of a replay from %d events back", wanted-first)
	require.Equal(t, wanted-maxReplay, got[0].id, "the reset resumes maxReplay ids before the log's position")
	require.Contains(t, got[0].data["reason"], "sse.max_replay_events")
	require.Equal(t, wanted, got[1].id)

	near := b.open(t, "/sse/events?target=web-9", openOptions{lastEventID: strconv.FormatInt(wanted-maxReplay, 10)}).start()
	require.Equal(t, []int64{wanted}, ids(near.live(t)), "resuming within the bound: no reset")

	// A deployment's stream reads that deployment's events by its index, so it is not
	// bounded: following a deployment from its start gets every event, its end too.
	dep := b.open(t, "/sse/deployments/"+b.a.String(), openOptions{lastEventID: strconv.FormatInt(first-1, 10)}).start()
	all := dep.until(t, wanted)
	require.Len(t, all, 3*maxReplay+2, "every event of the deployment, no reset")
	require.Equal(t, first, all[0].id)
}
