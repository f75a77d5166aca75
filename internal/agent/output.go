package agent

import (
	"sync"

	"github.com/mantis-deploy/mantis/internal/safetext"
)

// maxErrorBytes bounds the agent's own error text in a result: a long path or a
// message quoting what a command printed is cut, never a reason to lose the result.
const maxErrorBytes = safetext.MaxErrorBytes

// boundError returns error text as a result carries it: valid UTF-8 without NUL, at
// most maxErrorBytes, its end replaced by a marker when cut.
func boundError(s string) string { return safetext.Bound(s, maxErrorBytes) }

// tailBuffer keeps the last limit bytes written to it, and counts them all.
// It holds at most twice limit, growing only as output arrives, so a command
// that prints little costs little whatever the limit.
type tailBuffer struct {
	mu    sync.Mutex
	limit int
	buf   []byte
	total int64
}

func newTailBuffer(limit int) *tailBuffer { return &tailBuffer{limit: limit} }

// Write keeps the tail of p. It never fails, so a chatty command is never
// blocked or broken by the cut.
func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := len(p)
	t.total += int64(n)
	switch {
	case n >= t.limit:
		t.buf = append(t.buf[:0], p[n-t.limit:]...)
	case len(t.buf)+n > 2*t.limit:
		// Compact: keep just enough of the old tail that, with p, it makes limit.
		keep := t.limit - n
		copy(t.buf, t.buf[len(t.buf)-keep:])
		t.buf = append(t.buf[:keep], p...)
	default:
		t.buf = append(t.buf, p...)
	}
	return n, nil
}

// Tail returns a copy of the kept output and whether its start was cut.
func (t *tailBuffer) Tail() ([]byte, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	b := t.buf
	if len(b) > t.limit {
		b = b[len(b)-t.limit:]
	}
	return append([]byte(nil), b...), t.total > int64(t.limit)
}
