package agent

import (
	"context"
	"math/rand/v2"
	"time"
)

const (
	// retryBaseDelay is the first wait after a failed call to Thorax.
	retryBaseDelay = 200 * time.Millisecond
	// MaxRetryDelay caps the wait between attempts to reach Thorax, so an
	// agent is back at work within about that long of Thorax returning.
	MaxRetryDelay = 10 * time.Second
)

// retryBackoff is exponential backoff with jitter: the wait doubles per
// failure up to MaxRetryDelay, and each wait is half fixed, half random, so
// a fleet of agents that lost the same Thorax does not return in step.
type retryBackoff struct {
	base, max time.Duration
	failures  int
}

func newRetryBackoff() *retryBackoff {
	return &retryBackoff{base: retryBaseDelay, max: MaxRetryDelay}
}

// next returns the wait after one more failure.
func (b *retryBackoff) next() time.Duration {
	d := b.max
	if b.failures < 30 && b.base<<b.failures < b.max {
		d = b.base << b.failures
	}
	b.failures++
	return d/2 + rand.N(d/2+1)
}

// reset starts over after a success.
func (b *retryBackoff) reset() { b.failures = 0 }

// sleep waits d or until ctx is done, and reports whether the full wait passed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
