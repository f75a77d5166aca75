package schema

import (
	"context"
	"fmt"
	"time"

	"github.com/mantis-deploy/mantis/schema/internal/dbsqlc"
)

// DefaultEventRetention is how long events and live output are kept by default
// (retention.events).
const DefaultEventRetention = 30 * 24 * time.Hour

// pruneBatch bounds the rows one DELETE removes, so that pruning a long backlog never
// holds one long transaction over the event log.
const pruneBatch = 5000

// Pruned counts what one retention pass deleted.
type Pruned struct {
	Events int64
	Output int64
	// Through is the event log's retention watermark after the pass: the highest event
	// id deleted so far, 0 when none ever was.
	Through int64
}

// PruneRetention deletes the live output chunks and the events written before cutoff,
// in batches, and moves the event log's watermark on (EventsPrunedThrough), so that a
// stream resuming from before it is told that events are gone. Events go by id: every
// event up to the last one written before cutoff. It is idempotent and safe to run
// from every replica at once.
func PruneRetention(ctx context.Context, db DB, cutoff time.Time) (Pruned, error) {
	var p Pruned
	for {
		n, err := queries.PruneOutput(ctx, db, dbsqlc.PruneOutputParams{Cutoff: cutoff, MaxRows: pruneBatch})
		if err != nil {
			return p, fmt.Errorf("pruning output before %s: %w", cutoff.Format(time.RFC3339), err)
		}
		p.Output += n
		if n < pruneBatch {
			break
		}
	}
	if _, err := queries.PruneOutputTotals(ctx, db, cutoff); err != nil {
		return p, fmt.Errorf("pruning output totals before %s: %w", cutoff.Format(time.RFC3339), err)
	}
	through, err := queries.LastEventBefore(ctx, db, cutoff)
	if err != nil {
		return p, fmt.Errorf("reading the last event before %s: %w", cutoff.Format(time.RFC3339), err)
	}
	if through > 0 {
		// The watermark moves first: a stream must never miss an event silently, while
		// being told of a gap a moment early costs only a reload.
		if err := queries.MarkEventsPruned(ctx, db, through); err != nil {
			return p, fmt.Errorf("moving the event retention watermark to %d: %w", through, err)
		}
		for {
			n, err := queries.PruneEvents(ctx, db, dbsqlc.PruneEventsParams{Through: through, MaxRows: pruneBatch})
			if err != nil {
				return p, fmt.Errorf("pruning events through %d: %w", through, err)
			}
			p.Events += n
			if n < pruneBatch {
				break
			}
		}
	}
	if p.Through, err = EventsPrunedThrough(ctx, db); err != nil {
		return p, err
	}
	return p, nil
}

// EventsPrunedThrough is the highest event id retention deleted, 0 when none was.
func EventsPrunedThrough(ctx context.Context, db DB) (int64, error) {
	id, err := queries.EventsPrunedThrough(ctx, db)
	if err != nil {
		return 0, fmt.Errorf("reading the event retention watermark: %w", err)
	}
	return id, nil
}
