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

// Tick calls at once, then on every interval, and returns once its context ends.
func TestTickCallsAtOnceThenEveryIntervalUntilCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	calls := make(chan struct{}, 16)
	done := make(chan struct{})
	go func() {
		defer close(done)
		backoff.Tick(ctx, time.Millisecond, func(context.Context) {
			select {
			case calls <- struct{}{}:
			default: // the test reads only three
			}
		})
	}()
	for range 3 {
		select {
		case <-calls:
		case <-time.After(10 * time.Second):
			t.Fatal("Tick did not call again")
		}
	}
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Tick did not return once its context ended")
	}
}
