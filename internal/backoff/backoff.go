// Package backoff holds the waits of Mantis processes: the jittered exponential
// backoff every process uses between retries, so that processes that lost a dependency
// together do not come back in step; Sleep, a wait that ends with its context; and
// Tick, a periodic call.
package backoff

import (
	"context"
	"math/rand/v2"
	"time"
)

// Backoff yields jittered delays whose ceiling doubles from Min up to Max. The zero
// ceiling starts at Min; a Backoff is a value, so a copy starts over.
type Backoff struct {
	Min, Max time.Duration
	ceiling  time.Duration
}

// Next returns the delay before the next attempt: a random point in the upper half of a
// ceiling that doubles on every call up to Max.
func (b *Backoff) Next() time.Duration {
	switch {
	case b.ceiling == 0:
		b.ceiling = b.Min
	case b.ceiling < b.Max:
		b.ceiling = min(2*b.ceiling, b.Max)
	}
	half := b.ceiling / 2
	return half + rand.N(b.ceiling-half+1)
}

// Reset starts over after a success.
func (b *Backoff) Reset() { b.ceiling = 0 }

// Sleep waits d or until ctx ends, and reports whether the full wait passed.
func Sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// Tick calls f at once and then every interval until ctx ends.
func Tick(ctx context.Context, every time.Duration, f func(context.Context)) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		f(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
