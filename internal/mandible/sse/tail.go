package sse

import (
	"context"
	"math"
	"slices"
	"time"

	"github.com/mantis-deploy/mantis/internal/backoff"
	"github.com/mantis-deploy/mantis/schema"
)

// gap is a missing id the broker waits for: every id up to upTo is final once none of
// writers is running any more.
type gap struct {
	first   int64
	upTo    int64
	writers []string
	since   time.Time
}

// tail is the reading position, owned by Run's goroutine.
type tail struct {
	cursor int64 // the last id published
	safe   int64 // every id <= safe is final: missing ones will not appear
	held   *gap
}

// start finds the first position: the highest committed id, once every writer that
// may hold a lower one has finished.
func (b *Broker) start(ctx context.Context) (tail, error) {
	latest, err := schema.LatestEventID(ctx, b.opts.DB)
	if err != nil {
		return tail{}, err
	}
	// Listed after reading latest: any missing id below it is held by one of these.
	writers, err := schema.EventLogWriters(ctx, b.opts.DB)
	if err != nil {
		return tail{}, err
	}
	g := &gap{first: latest, upTo: latest, writers: writers, since: time.Now()}
	for len(g.writers) > 0 {
		b.holding.Store(g.first)
		done, err := b.writersDone(ctx, g)
		if err != nil {
			return tail{}, err
		}
		if done {
			break
		}
		if !backoff.Sleep(ctx, b.opts.PollInterval) {
			return tail{}, ctx.Err()
		}
	}
	b.holding.Store(0)
	return tail{cursor: latest, safe: latest}, nil
}

// writersDone reports whether none of g's writers is running any more, or g has been
// held for MaxHold.
func (b *Broker) writersDone(ctx context.Context, g *gap) (bool, error) {
	if len(g.writers) == 0 {
		return true, nil
	}
	current, err := schema.EventLogWriters(ctx, b.opts.DB)
	if err != nil {
		return false, err
	}
	var running []string
	for _, w := range g.writers {
		if slices.Contains(current, w) {
			running = append(running, w)
		}
	}
	if len(running) == 0 {
		return true, nil
	}
	if time.Since(g.since) >= b.opts.MaxHold {
		b.opts.Logger.WarnContext(ctx, "event log writers held a gap too long; publishing past it",
			"first_missing_id", g.first, "up_to", g.upTo, "writers", running, "max_hold", b.opts.MaxHold)
		return true, nil
	}
	g.writers = running
	return false, nil
}

// poll reads and publishes everything that can be published now.
func (b *Broker) poll(ctx context.Context, t *tail) error {
	for {
		if t.held != nil {
			done, err := b.writersDone(ctx, t.held)
			if err != nil {
				return err
			}
			if done {
				// Read only after the check, so the read sees what the writers committed.
				t.safe = max(t.safe, t.held.upTo)
				t.held = nil
			}
		}
		events, err := schema.ReadEvents(ctx, b.opts.DB, t.cursor, math.MaxInt64, schema.EventFilter{}, b.opts.BatchSize)
		if err != nil {
			return err
		}
		n := 0
		for _, e := range events {
			if e.ID != t.cursor+1 && e.ID > t.safe {
				break
			}
			t.cursor = e.ID
			n++
		}
		b.publish(ctx, events[:n])
		if t.held != nil && t.cursor >= t.held.upTo {
			t.held = nil
		}
		if n < len(events) {
			if t.held == nil {
				writers, err := schema.EventLogWriters(ctx, b.opts.DB)
				if err != nil {
					return err
				}
				t.held = &gap{first: t.cursor + 1, upTo: events[len(events)-1].ID, writers: writers, since: time.Now()}
				if len(writers) > 0 {
					b.holding.Store(t.held.first)
					return nil
				}
				continue // nothing in flight: the missing ids were rolled back
			}
			b.holding.Store(t.held.first)
			return nil
		}
		b.holding.Store(0)
		if len(events) < b.opts.BatchSize {
			return nil
		}
	}
}
