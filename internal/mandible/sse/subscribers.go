package sse

import (
	"context"

	"github.com/mantis-deploy/mantis/schema"
)

// publish sends events, in order, to every subscriber whose filter they match. A
// subscriber whose buffer is full is cut off rather than waited for.
func (b *Broker) publish(ctx context.Context, events []schema.Event) {
	if len(events) == 0 {
		return
	}
	frames := make([]*frame, 0, len(events))
	for _, e := range events {
		frames = append(frames, newFrame(e))
	}
	var slow int
	b.mu.Lock()
	for _, f := range frames {
		for s := range b.subs {
			if !s.filter.matches(f) {
				continue
			}
			select {
			case s.ch <- f:
			default:
				s.cut(errSlowClient)
				delete(b.subs, s)
				slow++
			}
		}
	}
	b.frontier = frames[len(frames)-1].id
	b.mu.Unlock()
	if slow > 0 {
		b.opts.Logger.InfoContext(ctx, "cut off slow event streams", "streams", slow, "buffer", b.opts.SubscriberBuffer)
	}
}

// subscribe registers a stream for the events that match f and returns the position
// it starts after: every matching event with a higher id is sent to it, in order,
// until it is cut off or unsubscribed. It waits for the broker to have started.
func (b *Broker) subscribe(ctx context.Context, f filter) (*subscriber, int64, error) {
	if err := b.waitReady(ctx); err != nil {
		return nil, 0, err
	}
	sctx, cut := context.WithCancelCause(ctx)
	s := &subscriber{filter: f, ch: make(chan *frame, b.opts.SubscriberBuffer), ctx: sctx, cut: cut}
	b.mu.Lock()
	if b.stopped {
		b.mu.Unlock()
		cut(errStopped)
		return nil, 0, errStopped
	}
	b.subs[s] = struct{}{}
	position := b.frontier
	b.mu.Unlock()
	select {
	case b.wake <- struct{}{}:
	default:
	}
	return s, position, nil
}

// unsubscribe removes s; it is safe to call after s was cut off.
func (b *Broker) unsubscribe(s *subscriber) {
	b.mu.Lock()
	delete(b.subs, s)
	b.mu.Unlock()
	s.cut(context.Canceled)
}
