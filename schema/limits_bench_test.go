package schema_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/domain"
	"github.com/mantis-deploy/mantis/schema"
)

// Sizes of BenchmarkClaimLimits.
const (
	benchLimitTargets   = 1000
	benchLimitPerTarget = 10
	benchLimitBatch     = 100
)

// BenchmarkClaimLimits drains the same queue (1,000 labelled targets, 10 requests
// each) in claims of 100, with the per-target default raised to 10 so that it does
// not bind: "off" with no label limit, "on" with four label limits defined (env=prod,
// env=staging, region=eu, region=us). After each claim its rows leave processing, as
// delivered requests whose commands ended do, untimed; only the claims are timed.
// The figure is rows claimed per second and the on/off ratio, from the same run.
func BenchmarkClaimLimits(b *testing.B) {
	var off, on time.Duration
	for range b.N {
		off += drainWithLimits(b, false)
		on += drainWithLimits(b, true)
	}
	rows := float64(b.N * benchLimitTargets * benchLimitPerTarget)
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(rows/off.Seconds(), "off-rows/s")
	b.ReportMetric(rows/on.Seconds(), "on-rows/s")
	b.ReportMetric(off.Seconds()/on.Seconds(), "on/off")
}

// drainWithLimits claims a fresh queue empty and returns the time spent claiming.
func drainWithLimits(b *testing.B, labelLimits bool) time.Duration {
	b.StopTimer()
	defer b.StartTimer()
	bd := fillLimitsQueue(b, labelLimits, false)
	_, err := schema.SetLimit(bd.ctx, bd.pool, schema.Limit{Name: domain.DefaultTargetLimit, Scope: domain.LimitScopeTarget, MaxRunning: benchLimitPerTarget}, "bench")
	require.NoError(b, err)
	var claiming time.Duration
	claimed := 0
	for {
		start := time.Now()
		res, err := schema.ClaimPending(bd.ctx, bd.pool, replica, benchLimitBatch)
		claiming += time.Since(start)
		require.NoError(b, err)
		if len(res.Claimed) == 0 {
			break
		}
		claimed += len(res.Claimed)
		_, err = bd.pool.Exec(bd.ctx, `UPDATE pending_dispatch_requests SET status = 'dispatched', dispatched_at = now() WHERE status = 'processing'`)
		require.NoError(b, err)
	}
	require.Equal(b, benchLimitTargets*benchLimitPerTarget, claimed)
	return claiming
}

// fillLimitsQueue enqueues 10 requests on each of 1,000 labelled targets, with the
// four label limits when labelLimits is set, and vacuums the queue. The requests of
// a target follow each other in the queue, or, with interleave, the queue takes one
// request of each target in turn (as deployments over a fleet enqueue them).
func fillLimitsQueue(b *testing.B, labelLimits, interleave bool) dispatchBundle {
	bd := setupDispatch(b)
	reqs := make([]schema.NewDispatchRequest, benchLimitTargets*benchLimitPerTarget)
	for i := range benchLimitTargets {
		name := fmt.Sprintf("host-%04d", i)
		labels := fmt.Sprintf(`{"env":%q,"region":%q}`, []string{"prod", "staging", "dev"}[i%3], []string{"eu", "us"}[i%2])
		bd.addLabelledTarget(b, name, labels)
		for j := range benchLimitPerTarget {
			at := i*benchLimitPerTarget + j
			if interleave {
				at = j*benchLimitTargets + i
			}
			reqs[at] = req(fmt.Sprintf("%s-%d", name, j), name, "normal")
		}
	}
	for start := 0; start < len(reqs); start += 1000 {
		bd.enqueue(b, reqs[start:start+1000]...)
	}
	if labelLimits {
		for _, l := range []schema.Limit{
			{Name: "prod", Label: "env", Value: "prod"}, {Name: "staging", Label: "env", Value: "staging"},
			{Name: "eu", Label: "region", Value: "eu"}, {Name: "us", Label: "region", Value: "us"},
		} {
			l.Scope, l.MaxRunning = domain.LimitScopeLabel, schema.MaxLimitRunning
			_, err := schema.SetLimit(bd.ctx, bd.pool, l, "bench")
			require.NoError(b, err)
		}
	}
	_, err := bd.pool.Exec(bd.ctx, `VACUUM ANALYZE pending_dispatch_requests`)
	require.NoError(b, err)
	return bd
}
