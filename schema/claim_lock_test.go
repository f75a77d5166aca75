package schema_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/domain"
	"github.com/mantis-deploy/mantis/schema"
)

// claimsLockSQL takes the advisory lock every claim takes first (LockClaims in
// schema/queries/limits.sql): what a claim in flight holds until it commits.
const claimsLockSQL = `SELECT pg_advisory_xact_lock(hashtextextended('mantis/limit/claims', 0))`

// A claim that starts while another claim is in flight waits for it, and then counts
// what it took: with the per-target default of one, the second request of a target
// whose first one the claim in flight took stays pending. The claim in flight is
// played by a transaction holding the claims lock that moves the first request to
// processing; without the lock the claim would count in a snapshot without that row
// and take the second request too.
func TestClaimWaitsForTheClaimInFlightAndCountsWhatItTook(t *testing.T) {
	t.Parallel()
	b := setupDispatch(t, "db-1")
	first := b.enqueue(t, req("first", "db-1", "normal"))
	second := b.enqueue(t, req("second", "db-1", "normal"))

	inFlight, err := b.pool.Begin(b.ctx)
	require.NoError(t, err)
	defer func() { _ = inFlight.Rollback(context.Background()) }()
	_, err = inFlight.Exec(b.ctx, claimsLockSQL)
	require.NoError(t, err)
	_, err = inFlight.Exec(b.ctx, `UPDATE pending_dispatch_requests SET status = 'processing', claimed_by = 'replica-b',
		claimed_at = now(), claim_epoch = claim_epoch + 1 WHERE id = $1`, first[0].ID)
	require.NoError(t, err)

	conn, err := b.pool.Acquire(b.ctx)
	require.NoError(t, err)
	defer conn.Release()
	pid := conn.Conn().PgConn().PID()
	type outcome struct {
		res schema.ClaimResult
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := schema.ClaimPending(b.ctx, conn.Conn(), replica, 10)
		done <- outcome{res, err}
	}()
	require.Eventually(t, func() bool {
		var waiting bool
		err := b.pool.QueryRow(b.ctx, `SELECT EXISTS (SELECT 1 FROM pg_locks
			WHERE pid = $1 AND locktype = 'advisory' AND NOT granted)`, int32(pid)).Scan(&waiting)
		return err == nil && waiting
	}, 10*time.Second, 10*time.Millisecond, "the claim waits for the claim in flight")
	require.Empty(t, done, "the claim returned while another held the claims lock")

	require.NoError(t, inFlight.Commit(b.ctx))
	var got outcome
	select {
	case got = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the claim did not return after the claim in flight committed")
	}
	require.NoError(t, got.err)
	require.Empty(t, got.res.Claimed, "db-1 runs the request the claim in flight took; its limit is one")
	status, _, _ := b.status(t, second[0].ID)
	require.Equal(t, domain.StatusPending, status)
}
