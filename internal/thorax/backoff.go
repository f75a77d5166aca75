package thorax

import (
	"context"
	"math/rand/v2"
	"time"
)

// backoff yields jittered, doubling delays between min and max, so that
// instances restarted together do not call Mandible in lockstep.
type backoff struct {
	min, max time.Duration
	ceiling  time.Duration
}

// next returns the delay before the next attempt: a random point in the
// upper half of a ceiling that doubles on every call up to max.
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

// sleep waits d or until ctx ends, and reports whether the full wait passed.
func sleep(ctx context.Context, d time.Duration) bool {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-timer.C:
		return true
	}
}
