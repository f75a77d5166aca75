package schema_test

import (
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"

	"github.com/mantis-deploy/mantis/internal/domain"
	"github.com/mantis-deploy/mantis/schema"
)

// claimOneByOne claims with batches of one until a claim takes nothing, and returns
// how many it took.
func claimOneByOne(t *testing.T, b dispatchBundle) int {
	t.Helper()
	n := 0
	for {
		res, err := schema.ClaimPending(b.ctx, b.pool, replica, 1)
		require.NoError(t, err)
		if len(res.Claimed) == 0 {
			return n
		}
		n += len(res.Claimed)
	}
}

// running is what runs on target, as target_running counts it.
func (b dispatchBundle) running(t *testing.T, target string) int {
	t.Helper()
	var n int
	require.NoError(t, b.pool.QueryRow(b.ctx, `SELECT target_running(id, 100000) FROM targets WHERE name = $1`, target).Scan(&n))
	return n
}

// A claim that takes a target's bound (target_claim_bounds) instead of counting
// still keeps to a limit lowered after the bound was written: the bound no longer
// leaves room for a batch, so the claim counts.
func TestClaimBoundGivesWayToALoweredLimit(t *testing.T) {
	t.Parallel()
	b := setupDispatch(t, "web-1")
	for i := range 6 {
		b.enqueue(t, req(fmt.Sprintf("r%d", i), "web-1", "normal"))
	}
	_, err := schema.SetLimit(b.ctx, b.pool, schema.Limit{Name: domain.DefaultTargetLimit, Scope: domain.LimitScopeTarget, MaxRunning: 100}, "test")
	require.NoError(t, err)
	first, err := schema.ClaimPending(b.ctx, b.pool, replica, 2)
	require.NoError(t, err)
	require.Len(t, first.Claimed, 2)
	var bound int
	require.NoError(t, b.pool.QueryRow(b.ctx, `SELECT claimed FROM target_claim_bounds`).Scan(&bound))
	require.Equal(t, 2, bound, "the claim left a bound: what it counted (0) plus what it took")

	_, err = schema.SetLimit(b.ctx, b.pool, schema.Limit{Name: "web-1-three", Scope: domain.LimitScopeTarget, Value: "web-1", MaxRunning: 3}, "test")
	require.NoError(t, err)
	require.Equal(t, 1, claimOneByOne(t, b), "one more fits under the lowered limit of three")
	require.Equal(t, 3, b.running(t, "web-1"))
}

// Rows claimed while label limits exist count against a target's bound: that path
// drops the bound, so the next claim without label limits counts again rather than
// trusting a bound below what runs.
func TestClaimBoundIsDroppedByAClaimUnderLabelLimits(t *testing.T) {
	t.Parallel()
	b := setupDispatch(t)
	b.addLabelledTarget(t, "db-1", `{"env":"prod"}`)
	for i := range 8 {
		b.enqueue(t, req(fmt.Sprintf("r%d", i), "db-1", "normal"))
	}
	_, err := schema.SetLimit(b.ctx, b.pool, schema.Limit{Name: domain.DefaultTargetLimit, Scope: domain.LimitScopeTarget, MaxRunning: 4}, "test")
	require.NoError(t, err)
	res, err := schema.ClaimPending(b.ctx, b.pool, replica, 1)
	require.NoError(t, err)
	require.Len(t, res.Claimed, 1, "no label limit: the claim counts and leaves a bound of one")

	_, err = schema.SetLimit(b.ctx, b.pool, schema.Limit{Name: "prod", Scope: domain.LimitScopeLabel, Label: "env", Value: "prod", MaxRunning: 100}, "test")
	require.NoError(t, err)
	res, err = schema.ClaimPending(b.ctx, b.pool, replica, 1)
	require.NoError(t, err)
	require.Len(t, res.Claimed, 1, "claimed under the label limit")
	require.NoError(t, schema.DeleteLimit(b.ctx, b.pool, "prod"))

	require.Equal(t, 2, claimOneByOne(t, b), "two more fit under the default of four")
	require.Equal(t, 4, b.running(t, "db-1"))
}

// Replicas racing with batches of one under a per-target limit of three, where a
// target's bound often leaves room for a batch so that claims take it instead of
// counting, never run more than three on a target: checked in the database after
// every claim.
func TestConcurrentClaimersUsingBoundsKeepToALimitOfThree(t *testing.T) {
	t.Parallel()
	b := setupDispatch(t)
	const targets, perTarget, claimers, limit = 3, 16, 4, 3
	var reqs []schema.NewDispatchRequest
	for i := range targets {
		name := fmt.Sprintf("app-%d", i)
		b.addTarget(t, name, &b.instance)
		for j := range perTarget {
			reqs = append(reqs, req(fmt.Sprintf("%s-%d", name, j), name, "normal"))
		}
	}
	b.enqueue(t, reqs...)
	_, err := schema.SetLimit(b.ctx, b.pool, schema.Limit{Name: domain.DefaultTargetLimit, Scope: domain.LimitScopeTarget, MaxRunning: limit}, "test")
	require.NoError(t, err)

	var maxInDB, claimedTotal atomic.Int64
	var g errgroup.Group
	for c := range claimers {
		g.Go(func() error {
			conn, err := b.pool.Acquire(b.ctx)
			if err != nil {
				return err
			}
			defer conn.Release()
			for idle := 0; idle < 400 && claimedTotal.Load() < targets*perTarget; {
				if c%2 == 0 { // half the claimers end what runs, half leave their rows running a while
					if _, err := conn.Exec(b.ctx, `UPDATE pending_dispatch_requests SET status = 'dispatched', dispatched_at = now()
						WHERE status = 'processing'`); err != nil {
						return err
					}
				}
				res, err := schema.ClaimPending(b.ctx, conn.Conn(), fmt.Sprintf("replica-%d", c), 1)
				if err != nil {
					return err
				}
				if len(res.Claimed) == 0 {
					idle++
					continue
				}
				var inDB int64
				if err := conn.QueryRow(b.ctx, `SELECT max(target_running(id, 100)) FROM targets`).Scan(&inDB); err != nil {
					return err
				}
				maxInDB.Store(max(maxInDB.Load(), inDB))
				claimedTotal.Add(int64(len(res.Claimed)))
			}
			return nil
		})
	}
	require.NoError(t, g.Wait())
	require.Equal(t, int64(targets*perTarget), claimedTotal.Load(), "every request was claimed")
	require.LessOrEqual(t, maxInDB.Load(), int64(limit), "more than the limit ran on a target")
	require.Equal(t, int64(limit), maxInDB.Load(), "the limit was reached, so the race was real")
	var bounded int
	require.NoError(t, b.pool.QueryRow(b.ctx, `SELECT count(*) FROM target_claim_bounds`).Scan(&bounded))
	t.Logf("targets with a bound at the end: %d", bounded)
}
