package schema_test

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"

	"github.com/mantis-deploy/mantis/schema"
)

// Replicas racing for a queue of several requests per target, on connections of
// their own, never hold two requests of one target at once under the per-target
// default of one: the claim counts, after the claims lock, what the claims before it
// committed. Each claimer marks a target as held after its claim committed and
// unmarks it before its rows end, and counts in the database what runs on the
// targets it claimed while it holds them, so an overlap seen here is one the claim
// allowed. 24 requests a target: with the claims lock removed, fewer races showed an
// overlap only in some runs.
func TestConcurrentClaimersKeepToATargetLimitOfOne(t *testing.T) {
	t.Parallel()
	b := setupDispatch(t)
	const targets, perTarget, claimers = 4, 24, 4
	var reqs []schema.NewDispatchRequest
	for i := range targets {
		name := fmt.Sprintf("db-%d", i)
		b.addTarget(t, name, &b.instance)
		for j := range perTarget {
			reqs = append(reqs, req(fmt.Sprintf("%s-%d", name, j), name, "normal"))
		}
	}
	b.enqueue(t, reqs...)

	var held sync.Map // target name -> *atomic.Int64
	var overlaps, claimedTotal atomic.Int64
	var g errgroup.Group
	for c := range claimers {
		g.Go(func() error {
			conn, err := b.pool.Acquire(b.ctx)
			if err != nil {
				return err
			}
			defer conn.Release()
			for idle := 0; idle < 400 && claimedTotal.Load() < targets*perTarget; {
				res, err := schema.ClaimPending(b.ctx, conn.Conn(), fmt.Sprintf("replica-%d", c), 4)
				if err != nil {
					return err
				}
				if len(res.Claimed) == 0 {
					idle++
					continue
				}
				names := make([]string, len(res.Claimed))
				for i, r := range res.Claimed {
					names[i] = r.Target
					n, _ := held.LoadOrStore(r.Target, new(atomic.Int64))
					if n.(*atomic.Int64).Add(1) > 1 {
						overlaps.Add(1)
					}
				}
				var inDB int
				if err := conn.QueryRow(b.ctx, `SELECT coalesce(max(target_running(id, 100)), 0) FROM targets WHERE name = ANY($1)`, names).Scan(&inDB); err != nil {
					return err
				}
				if inDB > 1 {
					overlaps.Add(1)
				}
				for _, r := range res.Claimed {
					n, _ := held.Load(r.Target)
					n.(*atomic.Int64).Add(-1)
				}
				if _, err := conn.Exec(b.ctx, `UPDATE pending_dispatch_requests SET status = 'dispatched', dispatched_at = now() WHERE id = ANY($1)`, claimedIDs(res)); err != nil {
					return err
				}
				claimedTotal.Add(int64(len(res.Claimed)))
			}
			return nil
		})
	}
	require.NoError(t, g.Wait())
	require.Equal(t, int64(targets*perTarget), claimedTotal.Load(), "every request was claimed")
	require.Zero(t, overlaps.Load(), "two requests of one target were held at once")
}
