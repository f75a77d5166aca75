package agent

import (
	"time"

	"github.com/mantis-deploy/mantis/internal/backoff"
)

const (
	// retryBaseDelay is the first wait after a failed call to Thorax.
	retryBaseDelay = 200 * time.Millisecond
	// MaxRetryDelay caps the wait between attempts to reach Thorax, so an
	// agent is back at work within about that long of Thorax returning.
	MaxRetryDelay = 10 * time.Second
)

// newRetryBackoff is the jittered exponential backoff between attempts to reach
// Thorax: a fleet of agents that lost the same Thorax does not return in step.
func newRetryBackoff() *backoff.Backoff {
	return &backoff.Backoff{Min: retryBaseDelay, Max: MaxRetryDelay}
}
