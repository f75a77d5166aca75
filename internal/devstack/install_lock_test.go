package devstack

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// Two package installs never overlap: the second waits for the first to release the
// lock (as two test processes installing stunnel and PgBouncer at once must).
func TestAptLockSerialisesInstalls(t *testing.T) {
	aptLockPath = filepath.Join(t.TempDir(), "apt.lock")
	ctx := context.Background()
	firstHolds, releaseFirst, secondRan := make(chan struct{}), make(chan struct{}), make(chan struct{})
	firstDone := make(chan error, 1)
	go func() {
		firstDone <- withAptLock(ctx, func() error {
			close(firstHolds)
			<-releaseFirst
			return nil
		})
	}()
	<-firstHolds
	secondDone := make(chan error, 1)
	go func() { secondDone <- withAptLock(ctx, func() error { close(secondRan); return nil }) }()
	require.Never(t, func() bool {
		select {
		case <-secondRan:
			return true
		default:
			return false
		}
	}, 5*aptLockPoll, aptLockPoll/2, "the second install ran while the first held the lock")
	close(releaseFirst)
	require.NoError(t, <-firstDone)
	require.NoError(t, <-secondDone)
	<-secondRan

	// A caller that gives up while waiting is told so.
	held := make(chan struct{})
	release := make(chan struct{})
	go func() {
		_ = withAptLock(ctx, func() error { close(held); <-release; return nil })
	}()
	<-held
	defer close(release)
	waitCtx, cancel := context.WithTimeout(ctx, 3*aptLockPoll)
	defer cancel()
	require.ErrorIs(t, withAptLock(waitCtx, func() error { t.Error("ran without the lock"); return nil }), context.DeadlineExceeded)
}
