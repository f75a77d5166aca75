package workers

import (
	"context"
	"log/slog"
	"time"

	"github.com/mantis-deploy/mantis/schema"
)

// RetentionOptions configures the retention loop.
type RetentionOptions struct {
	DB schema.DB
	// Keep is how long events and live output are kept (retention.events).
	Keep time.Duration
	// Interval is how often the loop prunes (retention.interval).
	Interval time.Duration
	Logger   *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// RunRetention prunes the event log and the live output older than opts.Keep, once at
// start and then every opts.Interval, until ctx ends. Every replica runs it: a pass is
// idempotent, and concurrent passes delete disjoint rows or none. A failed pass is
// logged and tried again at the next tick.
func RunRetention(ctx context.Context, opts RetentionOptions) error {
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	tick := time.NewTicker(opts.Interval)
	defer tick.Stop()
	for {
		pruned, err := schema.PruneRetention(ctx, opts.DB, now().Add(-opts.Keep))
		switch {
		case err != nil && ctx.Err() == nil:
			opts.Logger.WarnContext(ctx, "retention pass failed", "err", err)
		case err == nil && (pruned.Events > 0 || pruned.Output > 0):
			opts.Logger.InfoContext(ctx, "retention pruned events and output",
				"events", pruned.Events, "output_chunks", pruned.Output, "pruned_through", pruned.Through, "keep", opts.Keep)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}
