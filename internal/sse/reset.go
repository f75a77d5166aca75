package sse

import (
	"context"
	"encoding/json"
	"strconv"

	"github.com/mantis-deploy/mantis/internal/events"
	"github.com/mantis-deploy/mantis/schema"
)

// resetReason is what a reset event tells people.
const resetReason = "events after the requested id were pruned by retention: reload the current state, then follow this stream"

// resetIfPruned writes a reset event when a stream resumes after an event id below the
// retention watermark: the events in between are gone, and the client must reload
// instead of going on with a silent gap. The reset event carries the watermark as its
// id, so that a client reconnecting after it resumes past the gap; the stream goes on
// from there, which is the position returned.
func (h *handler) resetIfPruned(ctx context.Context, out *streamWriter, after int64) (int64, error) {
	through, err := schema.EventsPrunedThrough(ctx, h.broker.opts.DB)
	if err != nil {
		if ctx.Err() == nil {
			h.opts.Logger.WarnContext(ctx, "reading the event retention watermark failed", "err", err)
		}
		return after, err
	}
	if after >= through {
		return after, nil
	}
	out.arm()
	if err := out.write(resetFrame(through)); err != nil {
		return after, err
	}
	return through, out.flush()
}

// resetFrame is the reset event of a log pruned through the id through.
func resetFrame(through int64) []byte {
	data, _ := json.Marshal(events.ResetData{PrunedThrough: through, Reason: resetReason})
	return []byte("id: " + strconv.FormatInt(through, 10) + "\nevent: " + string(events.Reset) + "\ndata: " + string(data) + "\n\n")
}
