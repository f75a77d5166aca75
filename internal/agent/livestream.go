package agent

import (
	"fmt"
	"sync"
	"time"

	"github.com/mantis-deploy/mantis/internal/contract/liveoutput"
	mantisv1 "github.com/mantis-deploy/mantis/proto/mantis/v1"
)

// OutputSink receives the live output of the commands the agent runs: chunks as they
// are cut, then end once the command's output is over. Both must return at once: a
// sink that cannot keep up drops, it never holds the command or its result up.
type OutputSink interface {
	Start(cmd *mantisv1.Command)
	Chunks(cmd *mantisv1.Command, chunks []*mantisv1.OutputChunk)
	End(cmd *mantisv1.Command)
}

// flushBudget is the most bytes one flush sends: liveoutput.MaxBytesPerSecond spread
// over the flushes of a second.
const flushBudget = int(liveoutput.MaxBytesPerSecond * liveoutput.FlushInterval / time.Second)

// liveStream cuts a running command's output into chunks for a sink, at most every
// liveoutput.FlushInterval and flushBudget bytes at a time, holding at most
// liveoutput.MaxBufferedBytes; what overflows is dropped and replaced by a marker
// saying how much. Write never blocks and never fails.
type liveStream struct {
	cmd  *mantisv1.Command
	sink OutputSink

	mu      sync.Mutex
	buf     []byte
	dropped int64
	closed  bool
	seq     int64

	closing chan struct{}
	done    chan struct{}
}

func newLiveStream(cmd *mantisv1.Command, sink OutputSink) *liveStream {
	s := &liveStream{cmd: cmd, sink: sink, closing: make(chan struct{}), done: make(chan struct{})}
	sink.Start(cmd)
	go s.run()
	return s
}

// droppedMarker is the text that stands for output the agent dropped.
func droppedMarker(n int64) string {
	return fmt.Sprintf("\n[mantis: %d bytes of live output dropped: written faster than %d bytes/s; the result keeps the output's tail]\n",
		n, liveoutput.MaxBytesPerSecond)
}

// Write buffers p, or counts it dropped when the buffer is full.
func (s *liveStream) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return len(p), nil
	}
	if len(s.buf)+len(p) > liveoutput.MaxBufferedBytes {
		s.dropped += int64(len(p))
		return len(p), nil
	}
	s.noteDroppedLocked()
	s.buf = append(s.buf, p...)
	return len(p), nil
}

// noteDroppedLocked puts the marker of what was dropped where the gap is.
func (s *liveStream) noteDroppedLocked() {
	if s.dropped > 0 {
		s.buf = append(s.buf, droppedMarker(s.dropped)...)
		s.dropped = 0
	}
}

// close ends the stream: what is buffered is still sent, at the same rate, and then
// the sink hears the end. It does not wait.
func (s *liveStream) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed {
		s.closed = true
		s.noteDroppedLocked()
		close(s.closing)
	}
}

// run flushes until the stream is closed and its buffer sent.
func (s *liveStream) run() {
	defer close(s.done)
	defer s.sink.End(s.cmd)
	tick := time.NewTicker(liveoutput.FlushInterval)
	defer tick.Stop()
	closing := s.closing
	for {
		select {
		case <-tick.C:
		case <-closing:
			closing = nil // flush now, then keep the rate for what is left
		}
		if more := s.flush(); !more {
			return
		}
	}
}

// flush sends up to flushBudget buffered bytes, and reports whether the stream goes
// on (open, or closed with bytes left).
func (s *liveStream) flush() bool {
	s.mu.Lock()
	n := min(len(s.buf), flushBudget)
	out := s.buf[:n:n]
	s.buf = append([]byte(nil), s.buf[n:]...)
	more := !s.closed || len(s.buf) > 0
	var chunks []*mantisv1.OutputChunk
	for len(out) > 0 {
		c := min(len(out), liveoutput.MaxChunkBytes)
		chunks = append(chunks, &mantisv1.OutputChunk{Seq: s.seq, Data: out[:c:c]})
		s.seq++
		out = out[c:]
	}
	s.mu.Unlock()
	if len(chunks) > 0 {
		s.sink.Chunks(s.cmd, chunks)
	}
	return more
}
