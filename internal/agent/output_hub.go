package agent

import (
	"context"
	"sync"
	"time"

	mantisv1 "github.com/mantis-deploy/mantis/proto/mantis/v1"
)

const (
	// feedBacklogBytes bounds the live output a listen agent keeps per command for
	// its watchers; a watcher that falls further behind skips what was trimmed.
	feedBacklogBytes = 256 << 10
	// feedLinger is how long a command's feed stays after its output ended, so a
	// watcher that comes late still gets the end.
	feedLinger = 10 * time.Second
	// watchStartWait is how long a watcher waits for a command that has not started
	// (Thorax watches as it calls RunCommand) before it ends the stream empty.
	watchStartWait = 10 * time.Second
)

// outputHub is the OutputSink of a listen agent: it keeps each running command's
// recent chunks for WatchOutput streams.
type outputHub struct {
	mu    sync.Mutex
	feeds map[string]*outputFeed
}

// outputFeed is one command's live output.
type outputFeed struct {
	chunks  []*mantisv1.OutputChunk
	bytes   int
	started bool
	ended   bool
	changed chan struct{} // closed (and replaced) on every change
}

func newOutputHub() *outputHub { return &outputHub{feeds: map[string]*outputFeed{}} }

// feedLocked returns the command's feed, creating it. Callers hold mu.
func (h *outputHub) feedLocked(id string) *outputFeed {
	f := h.feeds[id]
	if f == nil {
		f = &outputFeed{changed: make(chan struct{})}
		h.feeds[id] = f
	}
	return f
}

func (f *outputFeed) signal() {
	close(f.changed)
	f.changed = make(chan struct{})
}

// Start marks the command's feed started.
func (h *outputHub) Start(cmd *mantisv1.Command) {
	h.mu.Lock()
	defer h.mu.Unlock()
	f := h.feedLocked(cmd.GetId())
	f.started = true
	f.signal()
}

// Chunks adds chunks to the command's feed, trimming its oldest past the backlog.
func (h *outputHub) Chunks(cmd *mantisv1.Command, chunks []*mantisv1.OutputChunk) {
	h.mu.Lock()
	defer h.mu.Unlock()
	f := h.feedLocked(cmd.GetId())
	for _, c := range chunks {
		f.chunks = append(f.chunks, c)
		f.bytes += len(c.GetData())
	}
	for f.bytes > feedBacklogBytes && len(f.chunks) > 1 {
		f.bytes -= len(f.chunks[0].GetData())
		f.chunks = f.chunks[1:]
	}
	f.signal()
}

// End ends the command's feed; it is forgotten feedLinger later.
func (h *outputHub) End(cmd *mantisv1.Command) {
	id := cmd.GetId()
	h.mu.Lock()
	f := h.feedLocked(id)
	f.ended = true
	f.signal()
	h.mu.Unlock()
	time.AfterFunc(feedLinger, func() { h.forget(id, f) })
}

// forget drops the command's feed if it is still f.
func (h *outputHub) forget(id string, f *outputFeed) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.feeds[id] == f {
		delete(h.feeds, id)
	}
}

// watch sends the command's chunks, those kept and then those to come, until its
// output ends, ctx ends, send fails, or the command does not start within
// watchStartWait.
func (h *outputHub) watch(ctx context.Context, id string, send func(*mantisv1.OutputChunk) error) error {
	startWait := time.NewTimer(watchStartWait)
	defer startWait.Stop()
	var next int64
	for {
		h.mu.Lock()
		f := h.feedLocked(id)
		var out []*mantisv1.OutputChunk
		for _, c := range f.chunks {
			if c.GetSeq() >= next {
				out = append(out, c)
			}
		}
		started, ended, changed := f.started, f.ended, f.changed
		h.mu.Unlock()
		for _, c := range out {
			if err := send(c); err != nil {
				return err
			}
			next = c.GetSeq() + 1
		}
		if ended {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-changed:
		case <-startWait.C:
			if !started {
				h.forgetUnstarted(id)
				return nil
			}
		}
	}
}

// forgetUnstarted drops the command's feed if no run ever started it.
func (h *outputHub) forgetUnstarted(id string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if f := h.feeds[id]; f != nil && !f.started {
		delete(h.feeds, id)
	}
}
