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
	"sync"
	"sync/atomic"
	"time"

	"github.com/mantis-deploy/mantis/internal/backoff"
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
		if !backoff.Sleep(ctx, b.opts.IdleInterval) {
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
