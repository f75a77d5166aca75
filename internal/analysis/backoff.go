package analysis

import (
	"context"
	"math/rand/v2"
	"time"
)

// backoff yields jittered delays that double from min up to max, so that replicas that
// lost the broker or the database together do not come back in step.
type backoff struct {
	min, max time.Duration
	ceiling  time.Duration
}

// next returns the delay before the next attempt: a random point in the upper half of
// a ceiling that doubles on every call up to max.
func (b *backoff) next() time.Duration {
	switch {
	case b.ceiling == 0:
		b.ceiling = b.min
	case b.ceiling < b.max:
		b.ceiling = min(2*b.ceiling, b.max)
	}
	half := b.ceiling / 2
	return half + rand.N(b.ceiling-half+1)
}

// reset starts over after a success.
func (b *backoff) reset() { b.ceiling = 0 }

// sleep waits d or until ctx ends, and reports whether the full wait passed.
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
