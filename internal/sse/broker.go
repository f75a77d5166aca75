// Package sse serves the deployment event log as Server-Sent Events.
//
// A Broker tails deployment_events (one goroutine per Mandible process) and fans every
// event out to the connected streams; the handler from NewHandler serves
// /sse/deployments/{id} and /sse/events on top of it. The log id is the SSE id, so a
// client that reconnects with Last-Event-ID is replayed everything after it from the
// log and then continues live, with no event lost or repeated.
//
// # Ids that commit out of order
//
// deployment_events.id is drawn when a row is inserted, not when its transaction
// commits: a transaction can hold id N+1 while N+2 commits and is read. A tailer that
// simply went on "after N+2" would never deliver N+1, and a client resuming after N+2
// would miss it too. The broker therefore publishes strictly in id order and never
// past a missing id until that id is known to be final:
//
//   - when it reads a batch whose highest id is M with a gap below M, it lists the
//     transactions that hold the write lock on deployment_events
//     (schema.EventLogWriters). An INSERT takes that lock before it draws its id and
//     keeps it until it commits or rolls back, so every missing id below M belongs to
//     one of those transactions or is gone for good;
//   - it polls until none of them is running any more, then reads again: a missing id
//     that is now there is published in its place, one that is still missing was rolled
//     back and is skipped.
//
// This waits exactly as long as the writers take, rather than guessing a grace window
// (which loses the event of any transaction slower than the window), and it does not
// depend on when a transaction gets its xid (a snapshot's xmin misses a writer that has
// drawn its id but not yet its xid). A gap left by a rollback costs one extra read.
// The one bound is MaxHold: a writer that keeps its transaction open longer than that
// (an abandoned session) stops holding the stream back; the ids it holds are logged,
// and are still replayed in order to clients that resume from before them once they
// commit.
//
// At start-up the same rule decides the first position: the broker starts at the
// highest committed id and serves nobody until the writers that were running then have
// finished, so a replay never reads the log before a row below that position commits.
package sse

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mantis-deploy/mantis/schema"
)

// errSlowClient is the cause with which a stream is cut off when it does not keep up
// with the events published to it.
var errSlowClient = errors.New("sse: client too slow, cut off")

// errStopped is the cause with which streams end when the broker stops.
var errStopped = errors.New("sse: broker stopped")

// BrokerOptions configures a Broker. Zero fields take the defaults shown.
type BrokerOptions struct {
	// DB is where the event log lives.
	DB     schema.DB
	Logger *slog.Logger
	// PollInterval is how often the log is read while streams are connected (100 ms).
	PollInterval time.Duration
	// IdleInterval is how often it is read while none are, to keep the position
	// current (1 s).
	IdleInterval time.Duration
	// BatchSize caps the rows read at once (1000).
	BatchSize int
	// SubscriberBuffer is how many events a stream may fall behind before it is cut
	// off (1024).
	SubscriberBuffer int
	// MaxHold bounds how long a missing id holds the streams back while a writer
	// that may hold it is still running (30 s).
	MaxHold time.Duration
	// Notify, when set, signals that events may have been committed (a LISTEN
	// wake-up, for instance); the log is then read at once instead of at the next
	// poll. Polling goes on regardless.
	Notify <-chan struct{}
}

func (o BrokerOptions) withDefaults() BrokerOptions {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.PollInterval <= 0 {
		o.PollInterval = 100 * time.Millisecond
	}
	if o.IdleInterval <= 0 {
		o.IdleInterval = time.Second
	}
	if o.BatchSize <= 0 {
		o.BatchSize = 1000
	}
	if o.SubscriberBuffer <= 0 {
		o.SubscriberBuffer = 1024
	}
	if o.MaxHold <= 0 {
		o.MaxHold = 30 * time.Second
	}
	return o
}

// Broker tails the event log and fans events out to subscribed streams. Create it
// with NewBroker and run it with Run.
type Broker struct {
	opts BrokerOptions

	mu       sync.Mutex
	subs     map[*subscriber]struct{}
	frontier int64 // every event with id <= frontier has been published
	stopped  bool

	ready chan struct{} // closed once the start position is known
	done  chan struct{} // closed when Run returns
	wake  chan struct{} // a new subscriber asks for a prompt read

	// holding is the first id the broker is waiting for, 0 when it is not waiting.
	holding atomic.Int64
}

// subscriber is one stream's subscription.
type subscriber struct {
	filter filter
	ch     chan *frame
	ctx    context.Context
	cut    context.CancelCauseFunc
}

// NewBroker returns a broker over the log in opts.DB.
func NewBroker(opts BrokerOptions) *Broker {
	return &Broker{
		opts:  opts.withDefaults(),
		subs:  map[*subscriber]struct{}{},
		ready: make(chan struct{}),
		done:  make(chan struct{}),
		wake:  make(chan struct{}, 1),
	}
}

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

// Run tails the log until ctx ends, then ends every stream and returns nil. Database
// errors are logged and retried; they do not end Run.
func (b *Broker) Run(ctx context.Context) error {
	defer b.stop()
	log := b.opts.Logger
	var t tail
	for {
		var err error
		t, err = b.start(ctx)
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return nil
		}
		log.WarnContext(ctx, "sse broker could not start; retrying", "err", err)
		if !sleep(ctx, b.opts.IdleInterval) {
			return nil
		}
	}
	b.mu.Lock()
	b.frontier = t.cursor
	b.mu.Unlock()
	close(b.ready)
	log.InfoContext(ctx, "sse broker started", "position", t.cursor)

	timer := time.NewTimer(0)
	defer timer.Stop()
	failures := 0
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-timer.C:
		case <-b.wake:
		case <-b.opts.Notify:
		}
		if err := b.poll(ctx, &t); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			failures++
			log.WarnContext(ctx, "reading the event log failed", "err", err, "failures", failures)
			timer.Reset(min(time.Duration(failures)*b.opts.PollInterval, 5*time.Second))
			continue
		}
		failures = 0
		b.mu.Lock()
		idle := len(b.subs) == 0
		b.mu.Unlock()
		if idle && t.held == nil {
			timer.Reset(b.opts.IdleInterval)
		} else {
			timer.Reset(b.opts.PollInterval)
		}
	}
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
		if !sleep(ctx, b.opts.PollInterval) {
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

// position returns the id up to which events have been published, once the broker
// has started.
func (b *Broker) position(ctx context.Context) (int64, error) {
	if err := b.waitReady(ctx); err != nil {
		return 0, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.frontier, nil
}

func (b *Broker) waitReady(ctx context.Context) error {
	select {
	case <-b.ready:
		return nil
	case <-b.done:
		return errStopped
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// running reports whether the broker has not stopped.
func (b *Broker) running() bool {
	select {
	case <-b.done:
		return false
	default:
		return true
	}
}

func (b *Broker) stop() {
	b.mu.Lock()
	b.stopped = true
	for s := range b.subs {
		s.cut(errStopped)
		delete(b.subs, s)
	}
	b.mu.Unlock()
	close(b.done)
}

// sleep waits d or until ctx ends, reporting whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
