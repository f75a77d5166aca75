package sse

import (
	"net/http"
	"sync"
	"time"
)

// streamWriter writes to one client, each batch of writes under a deadline; abort
// makes the pending and every later write fail, which closes the connection.
type streamWriter struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration

	mu   sync.Mutex
	done bool // aborted or finished: the deadline is no longer ours to move
}

func newStreamWriter(w http.ResponseWriter, timeout time.Duration) *streamWriter {
	return &streamWriter{w: w, rc: http.NewResponseController(w), timeout: timeout}
}

// arm gives the writes up to the next flush their deadline.
func (s *streamWriter) arm() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.done {
		_ = s.rc.SetWriteDeadline(time.Now().Add(s.timeout))
	}
}

func (s *streamWriter) write(b []byte) error {
	_, err := s.w.Write(b)
	return err
}

func (s *streamWriter) flush() error {
	return s.rc.Flush()
}

func (s *streamWriter) abort() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.done {
		s.done = true
		_ = s.rc.SetWriteDeadline(time.Now())
	}
}

// finish clears the write deadline, unless aborted, so that it does not outlive the
// stream on a reused connection.
func (s *streamWriter) finish() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.done {
		s.done = true
		_ = s.rc.SetWriteDeadline(time.Time{})
	}
}
