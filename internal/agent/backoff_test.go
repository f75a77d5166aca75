package agent

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestRetryBackoffGrowsWithJitterUpToTheCap(t *testing.T) {
	t.Parallel()
	b := newRetryBackoff()
	ceiling := retryBaseDelay
	seen := map[time.Duration]bool{}
	for range 40 {
		d := b.Next()
		require.GreaterOrEqual(t, d, ceiling/2)
		require.LessOrEqual(t, d, ceiling)
		require.LessOrEqual(t, d, MaxRetryDelay)
		seen[d] = true
		ceiling = min(2*ceiling, MaxRetryDelay)
	}
	require.Greater(t, len(seen), 30, "waits are jittered")

	b.Reset()
	require.LessOrEqual(t, b.Next(), retryBaseDelay)
}
