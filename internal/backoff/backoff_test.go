package backoff_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/backoff"
)

func TestNextDoublesWithJitterUpToMax(t *testing.T) {
	t.Parallel()
	b := backoff.Backoff{Min: 100 * time.Millisecond, Max: 800 * time.Millisecond}
	for _, ceiling := range []time.Duration{100, 200, 400, 800, 800} {
		ceiling *= time.Millisecond
		d := b.Next()
		require.GreaterOrEqual(t, d, ceiling/2)
		require.LessOrEqual(t, d, ceiling)
	}
	b.Reset()
	require.LessOrEqual(t, b.Next(), 100*time.Millisecond, "reset starts over")
}

func TestSleepStopsWithItsContext(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.False(t, backoff.Sleep(ctx, time.Hour))
	require.True(t, backoff.Sleep(context.Background(), time.Millisecond))
}
