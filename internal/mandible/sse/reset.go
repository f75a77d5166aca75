package sse

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/mantis-deploy/mantis/internal/contract/events"
	"github.com/mantis-deploy/mantis/schema"
)

// What a reset event tells people: why the events after the requested id are not
// replayed.
const (
	resetReason   = "events after the requested id were pruned by retention: reload the current state, then follow this stream"
	tooFarBackFmt = "the requested id is more than %d events back, more than a stream replays (sse.max_replay_events): " +
		"reload the current state, then follow this stream"
)

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
	return writeReset(out, after, through, resetReason)
}

// resetIfTooFarBack writes a reset event when a stream resumes more than MaxReplay
// ids before through, the log's position: a replay reads every row in between,
// whatever its filter keeps, so it is bounded by ids. The stream goes on MaxReplay
// ids before through, the position returned.
func (h *handler) resetIfTooFarBack(out *streamWriter, after, through int64) (int64, error) {
	if through-after <= h.opts.MaxReplay {
		return after, nil
	}
	return writeReset(out, after, through-h.opts.MaxReplay, fmt.Sprintf(tooFarBackFmt, h.opts.MaxReplay))
}

// writeReset writes a reset event that moves a stream at after on to the id to, and
// returns to.
func writeReset(out *streamWriter, after, to int64, reason string) (int64, error) {
	out.arm()
	if err := out.write(resetFrame(to, reason)); err != nil {
		return after, err
	}
	return to, out.flush()
}

// resetFrame is the reset event that moves a stream on to the id through.
func resetFrame(through int64, reason string) []byte {
	data, _ := json.Marshal(events.ResetData{PrunedThrough: through, Reason: reason})
	return []byte("id: " + strconv.FormatInt(through, 10) + "\nevent: " + string(events.Reset) + "\ndata: " + string(data) + "\n\n")
}
