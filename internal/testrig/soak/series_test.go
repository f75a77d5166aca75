package soak_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/testrig/soak"
)

// at is a sample of every figure at elapsed, with rss in MiB.
func at(elapsed time.Duration, rssMiB int64, goroutines, fds, conns int) soak.Sample {
	return soak.Sample{Elapsed: elapsed, RSS: rssMiB << 20, Goroutines: goroutines, FDs: fds, DBConns: conns}
}

func TestMinutesTakeTheMedianOfEachMinuteAndDropTheDrain(t *testing.T) {
	t.Parallel()
	samples := []soak.Sample{
		at(5*time.Second, 30, 100, 20, 8),
		at(30*time.Second, 32, 400, 21, 8), // a burst: the median ignores it
		at(55*time.Second, 31, 101, 22, 7),
		at(65*time.Second, 40, 110, 30, 8),
		at(3*time.Minute, 99, 999, 999, 99), // after the load: dropped
	}
	ms := soak.Minutes(samples, 3)
	require.Equal(t, []soak.Minute{
		{Index: 1, Samples: 3, RSS: 31 << 20, Goroutines: 101, FDs: 21, DBConns: 8},
		{Index: 2, Samples: 1, RSS: 40 << 20, Goroutines: 110, FDs: 30, DBConns: 8},
	}, ms)
}

func TestMinutesIgnoreUnknownReadings(t *testing.T) {
	t.Parallel()
	ms := soak.Minutes([]soak.Sample{
		{Elapsed: time.Second, RSS: 10 << 20, Goroutines: soak.Unknown, FDs: 5, DBConns: soak.Unknown},
		{Elapsed: 2 * time.Second, RSS: 10 << 20, Goroutines: 50, FDs: 5, DBConns: soak.Unknown},
	}, 1)
	require.Len(t, ms, 1)
	require.Equal(t, 50, ms[0].Goroutines)
	require.Equal(t, soak.Unknown, ms[0].DBConns, "a process without a database has no connections to judge")
}

func verdicts(t *testing.T, minutes []soak.Minute) map[soak.Metric]soak.Verdict {
	t.Helper()
	out := map[soak.Metric]soak.Verdict{}
	for _, v := range soak.Judge("mandible-0", minutes) {
		require.Equal(t, "mandible-0", v.Process)
		out[v.Metric] = v
	}
	require.Len(t, out, len(soak.Metrics))
	return out
}

func minute(i int, rssMiB int64, goroutines, fds, conns int) soak.Minute {
	return soak.Minute{Index: i, Samples: 12, RSS: rssMiB << 20, Goroutines: goroutines, FDs: fds, DBConns: conns}
}

func TestJudgeComparesTheLastMinuteWithMinuteTwo(t *testing.T) {
	t.Parallel()
	// Minute 1 is warm-up and does not count; the middle minutes do not either.
	flat := verdicts(t, []soak.Minute{
		minute(1, 10, 50, 10, 2), minute(2, 100, 200, 40, 8), minute(3, 500, 900, 90, 20), minute(4, 109, 205, 35, 8),
	})
	for _, m := range soak.Metrics {
		require.True(t, flat[m].Flat, "%s", flat[m])
	}
	require.Equal(t, int64(200), flat[soak.MetricGoroutines].Baseline)
	require.Equal(t, int64(205), flat[soak.MetricGoroutines].End)

	grown := verdicts(t, []soak.Minute{minute(2, 100, 200, 40, 8), minute(3, 110, 206, 34, 14)})
	require.False(t, grown[soak.MetricRSS].Flat, "10%% growth is not under 10%%")
	require.False(t, grown[soak.MetricGoroutines].Flat, "+6 is beyond ±5")
	require.False(t, grown[soak.MetricFDs].Flat, "-6 is beyond ±5")
	require.False(t, grown[soak.MetricDBConns].Flat)
	require.Contains(t, grown[soak.MetricGoroutines].String(), "mandible-0 goroutines: NOT FLAT (200 -> 206, +6, limit ±5)")
	require.Contains(t, grown[soak.MetricRSS].String(), "mandible-0 RSS: NOT FLAT (100.0 MiB -> 110.0 MiB, +10.0%")
}

func TestJudgeNeedsAMinuteAfterTheBaseline(t *testing.T) {
	t.Parallel()
	for _, ms := range [][]soak.Minute{nil, {minute(1, 10, 1, 1, 1), minute(2, 10, 1, 1, 1)}} {
		for _, v := range verdicts(t, ms) {
			require.False(t, v.Flat, "a run too short to show a trend proves nothing: %s", v)
		}
	}
}

func TestJudgeSkipsWhatAProcessDoesNotHaveButNotWhatWasMissed(t *testing.T) {
	t.Parallel()
	v := verdicts(t, []soak.Minute{minute(2, 10, 20, 30, soak.Unknown), minute(3, 10, 20, 30, soak.Unknown)})
	require.True(t, v[soak.MetricDBConns].Flat)
	require.Equal(t, "not applicable", v[soak.MetricDBConns].Reason)

	v = verdicts(t, []soak.Minute{minute(2, 10, 20, 30, 4), minute(3, 10, soak.Unknown, 30, 4)})
	require.False(t, v[soak.MetricGoroutines].Flat, "a figure that could not be read at the end is not shown flat")
	require.Equal(t, "not read in minute 3", v[soak.MetricGoroutines].Reason)
}

func TestReportListsEveryFailedVerdict(t *testing.T) {
	t.Parallel()
	ms := []soak.Minute{minute(2, 100, 200, 40, 8), minute(3, 100, 300, 40, 8)}
	r := soak.Report{Processes: []soak.ProcessReport{
		{Name: "thorax-0", Minutes: ms, Verdicts: soak.Judge("thorax-0", ms), Drained: &soak.Minute{RSS: 90 << 20, Goroutines: 199, FDs: 40, DBConns: 8}},
	}}
	bad := r.NotFlat()
	require.Len(t, bad, 1)
	require.Equal(t, soak.MetricGoroutines, bad[0].Metric)
	r.Latency = []soak.LatencyMinute{{Index: 2, Enqueued: 10, Succeeded: 0, NotSucceeded: 10, Completed: 3}}
	md := r.Markdown()
	require.Contains(t, md, "| 2 | 10 | 0 | – | – | 3 |", "no percentile of nothing")
	require.Contains(t, md, "**thorax-0**")
	require.Contains(t, md, "| 3 | 100.0 | 300 | 40 | 8 |\n| after the drain | 90.0 | 199 | 40 | 8 |")
	require.Contains(t, md, "- thorax-0 goroutines: NOT FLAT (200 -> 300, +100, limit ±5)")
}

func TestSinceIsTheMedianAfterTheLoad(t *testing.T) {
	t.Parallel()
	samples := []soak.Sample{at(time.Minute, 50, 300, 30, 9), at(3*time.Minute, 40, 120, 20, 2), at(3*time.Minute+5*time.Second, 41, 119, 20, 2), at(4*time.Minute, 42, 500, 20, 2)}
	m, ok := soak.Since(samples, 3*time.Minute)
	require.True(t, ok)
	require.Equal(t, soak.Minute{Samples: 3, RSS: 41 << 20, Goroutines: 120, FDs: 20, DBConns: 2}, m)
	_, ok = soak.Since(samples, 5*time.Minute)
	require.False(t, ok)
}
