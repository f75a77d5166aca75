package soak

import (
	"fmt"
	"slices"
	"time"
)

// Metric names one of the figures a soak follows per process.
type Metric string

// The figures a soak follows.
const (
	MetricRSS        Metric = "RSS"
	MetricGoroutines Metric = "goroutines"
	MetricFDs        Metric = "open fds"
	MetricDBConns    Metric = "db conns"
)

// Metrics lists the figures in the order the report shows them.
var Metrics = []Metric{MetricRSS, MetricGoroutines, MetricFDs, MetricDBConns}

// What flat means: from BaselineMinute to the last minute, RSS grows less than
// MaxRSSGrowth and every count ends within CountTolerance of its baseline.
const (
	BaselineMinute = 2
	MaxRSSGrowth   = 0.10
	CountTolerance = 5
)

// Unknown stands for a figure a process does not have (database connections of a
// process without a database) or that could not be read.
const Unknown = -1

// Sample is one reading of one process.
type Sample struct {
	// Elapsed is the time since the load started.
	Elapsed time.Duration
	// RSS is in bytes.
	RSS int64
	// Goroutines, FDs and DBConns are counts, or Unknown.
	Goroutines, FDs, DBConns int
}

// Minute is a process's figures over one minute of load: the median of its samples,
// which a single reading taken amid a burst of requests would not be.
type Minute struct {
	// Index counts from 1, the first minute of load.
	Index   int
	Samples int
	RSS     int64
	// Goroutines, FDs and DBConns are counts, or Unknown.
	Goroutines, FDs, DBConns int
}

// Value returns figure m of the minute.
func (mn Minute) Value(m Metric) int64 {
	switch m {
	case MetricRSS:
		return mn.RSS
	case MetricGoroutines:
		return int64(mn.Goroutines)
	case MetricFDs:
		return int64(mn.FDs)
	case MetricDBConns:
		return int64(mn.DBConns)
	}
	return Unknown
}

// Minutes groups samples by minute of load and takes the median of each figure;
// samples past the last whole minute (the drain after the load) are dropped.
func Minutes(samples []Sample, minutes int) []Minute {
	byMinute := make([][]Sample, minutes)
	for _, s := range samples {
		if i := int(s.Elapsed / time.Minute); s.Elapsed >= 0 && i < minutes {
			byMinute[i] = append(byMinute[i], s)
		}
	}
	var out []Minute
	for i, ss := range byMinute {
		if len(ss) == 0 {
			continue
		}
		out = append(out, Minute{
			Index:      i + 1,
			Samples:    len(ss),
			RSS:        median(ss, func(s Sample) int64 { return s.RSS }),
			Goroutines: int(median(ss, func(s Sample) int64 { return int64(s.Goroutines) })),
			FDs:        int(median(ss, func(s Sample) int64 { return int64(s.FDs) })),
			DBConns:    int(median(ss, func(s Sample) int64 { return int64(s.DBConns) })),
		})
	}
	return out
}

// Since is the median of the samples taken at or after elapsed (Index 0), such as
// those taken once the load has drained; ok is false when there are none.
func Since(samples []Sample, elapsed time.Duration) (Minute, bool) {
	var ss []Sample
	for _, s := range samples {
		if s.Elapsed >= elapsed {
			ss = append(ss, s)
		}
	}
	if len(ss) == 0 {
		return Minute{}, false
	}
	return Minute{
		Samples:    len(ss),
		RSS:        median(ss, func(s Sample) int64 { return s.RSS }),
		Goroutines: int(median(ss, func(s Sample) int64 { return int64(s.Goroutines) })),
		FDs:        int(median(ss, func(s Sample) int64 { return int64(s.FDs) })),
		DBConns:    int(median(ss, func(s Sample) int64 { return int64(s.DBConns) })),
	}, true
}

// median is the median of the known values of f over ss (the lower one of an even
// count), or Unknown when none is known.
func median(ss []Sample, f func(Sample) int64) int64 {
	var vs []int64
	for _, s := range ss {
		if v := f(s); v != Unknown {
			vs = append(vs, v)
		}
	}
	if len(vs) == 0 {
		return Unknown
	}
	slices.Sort(vs)
	return vs[(len(vs)-1)/2]
}

// Verdict says whether one figure of one process stayed flat.
type Verdict struct {
	Process string
	Metric  Metric
	// Baseline is the figure in BaselineMinute, End in the last minute.
	Baseline, End int64
	// Flat is true when the figure stayed within bounds, or has no value.
	Flat bool
	// Reason explains a verdict that is not a comparison ("no database", "too short").
	Reason string
}

// String is the verdict as the report prints it.
func (v Verdict) String() string {
	word := "flat"
	if !v.Flat {
		word = "NOT FLAT"
	}
	if v.Reason != "" {
		return fmt.Sprintf("%s %s: %s (%s)", v.Process, v.Metric, word, v.Reason)
	}
	if v.Metric == MetricRSS {
		return fmt.Sprintf("%s %s: %s (%s -> %s, %+.1f%%, limit +%.0f%%)", v.Process, v.Metric, word,
			mib(v.Baseline), mib(v.End), growth(v.Baseline, v.End)*100, MaxRSSGrowth*100)
	}
	return fmt.Sprintf("%s %s: %s (%d -> %d, %+d, limit ±%d)", v.Process, v.Metric, word,
		v.Baseline, v.End, v.End-v.Baseline, CountTolerance)
}

func growth(base, end int64) float64 {
	if base <= 0 {
		return 0
	}
	return float64(end-base) / float64(base)
}

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

// Judge compares each figure of a process's last minute with its BaselineMinute.
// A run whose last minute is not after the baseline cannot show a trend and is not
// flat.
func Judge(process string, minutes []Minute) []Verdict {
	var base, end *Minute
	for i := range minutes {
		if minutes[i].Index == BaselineMinute {
			base = &minutes[i]
		}
	}
	if len(minutes) > 0 {
		end = &minutes[len(minutes)-1]
	}
	out := make([]Verdict, 0, len(Metrics))
	for _, m := range Metrics {
		v := Verdict{Process: process, Metric: m}
		switch {
		case base == nil || end == nil || end.Index <= BaselineMinute:
			v.Reason = fmt.Sprintf("no samples after minute %d to compare", BaselineMinute)
		case base.Value(m) == Unknown && end.Value(m) == Unknown:
			v.Flat, v.Reason = true, "not applicable"
		case base.Value(m) == Unknown:
			v.Reason = fmt.Sprintf("not read in minute %d", base.Index)
		case end.Value(m) == Unknown:
			v.Reason = fmt.Sprintf("not read in minute %d", end.Index)
		default:
			v.Baseline, v.End = base.Value(m), end.Value(m)
			v.Flat = flat(m, v.Baseline, v.End)
		}
		out = append(out, v)
	}
	return out
}

// flat applies the definition: RSS growth under MaxRSSGrowth, counts within
// CountTolerance.
func flat(m Metric, base, end int64) bool {
	if m == MetricRSS {
		return growth(base, end) < MaxRSSGrowth
	}
	d := end - base
	return d >= -CountTolerance && d <= CountTolerance
}
