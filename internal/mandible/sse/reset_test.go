package sse

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/contract/events"
	"github.com/mantis-deploy/mantis/schema"
)

// A stream resuming from before the oldest event retention kept gets a reset event
// first, carrying the watermark as its id, then the kept events; a stream resuming
// from after the watermark gets no reset.
func TestResumeFromBeforeRetentionGetsResetFirst(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOptions{})
	data := map[string]any{"step": "s"}
	first := b.insert(t, &b.a, "step.started", data)
	pruned := b.insert(t, &b.a, "step.started", data)
	_, err := b.pool.Exec(b.ctx, `UPDATE deployment_events SET created_at = now() - interval '40 days' WHERE id <= $1`, pruned)
	require.NoError(t, err)
	kept := b.insert(t, &b.a, "step.started", data)
	p, err := schema.PruneRetention(b.ctx, b.pool, time.Now().Add(-schema.DefaultEventRetention))
	require.NoError(t, err)
	require.Equal(t, pruned, p.Through)

	path := "/sse/deployments/" + b.a.String()
	c := b.open(t, path, openOptions{lastEventID: strconv.FormatInt(first, 10)}).start()
	// The kept event comes in the replay, or just after it when the broker's tail had
	// not read it yet when the stream opened.
	got := c.until(t, kept)
	require.Len(t, got, 2, "the reset, then the kept event")
	require.Equal(t, string(events.Reset), got[0].typ)
	require.Equal(t, pruned, got[0].id, "the reset's id resumes past the gap")
	require.EqualValues(t, pruned, got[0].data["pruned_through"])
	require.Equal(t, kept, got[1].id)

	again := b.open(t, path, openOptions{lastEventID: strconv.FormatInt(got[0].id, 10)}).start()
	replayed := again.live(t)
	require.Equal(t, []int64{kept}, ids(replayed), "resuming from the reset's id: no second reset")
}
