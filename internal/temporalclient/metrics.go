// MetricsHandler exports the Temporal SDK's own metrics (requests to
// the frontend, workflow and activity task latencies, poller counts, sticky
// cache) through the Prometheus client: a client.MetricsHandler whose counters,
// gauges and timers become Prometheus vectors created on first use.
//
// A metric's label names are the tag keys of its first use; a later use with
// other tags fills the missing labels with "" and drops the extra ones, because
// a Prometheus family has one set of label names.

package temporalclient

import (
	"errors"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.temporal.io/sdk/client"
)

// MetricsPrefix starts the name of every metric the handler exports.
const MetricsPrefix = "temporal_"

// timerBuckets span a quick frontend call to a long poll and a slow activity.
var timerBuckets = []float64{.001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120}

// MetricsHandler is a client.MetricsHandler recording into a Prometheus registerer.
type MetricsHandler struct {
	families *families
	tags     map[string]string
}

var _ client.MetricsHandler = (*MetricsHandler)(nil)

// NewMetricsHandler returns a handler that registers the SDK's metrics with reg as the SDK
// first records them.
func NewMetricsHandler(reg prometheus.Registerer) *MetricsHandler {
	return &MetricsHandler{families: &families{reg: reg, byName: map[string]*family{}}}
}

// WithTags returns a handler that adds tags to everything it records.
func (h *MetricsHandler) WithTags(tags map[string]string) client.MetricsHandler {
	merged := maps.Clone(h.tags)
	if merged == nil {
		merged = map[string]string{}
	}
	maps.Copy(merged, tags)
	return &MetricsHandler{families: h.families, tags: merged}
}

// Counter returns the counter name_total with the handler's tags.
func (h *MetricsHandler) Counter(name string) client.MetricsCounter {
	f := h.families.get(counterName(name), h.tags, func(n string, labels []string) prometheus.Collector {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: n, Help: "Temporal SDK counter " + name + "."}, labels)
	})
	if f == nil {
		return client.MetricsNopHandler.Counter(name)
	}
	c := f.vec.(*prometheus.CounterVec).WithLabelValues(f.values(h.tags)...)
	return counterFunc(func(d int64) { c.Add(float64(d)) })
}

// Gauge returns the gauge name with the handler's tags.
func (h *MetricsHandler) Gauge(name string) client.MetricsGauge {
	f := h.families.get(SanitizeName(name), h.tags, func(n string, labels []string) prometheus.Collector {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: n, Help: "Temporal SDK gauge " + name + "."}, labels)
	})
	if f == nil {
		return client.MetricsNopHandler.Gauge(name)
	}
	g := f.vec.(*prometheus.GaugeVec).WithLabelValues(f.values(h.tags)...)
	return gaugeFunc(g.Set)
}

// Timer returns the histogram name_seconds with the handler's tags.
func (h *MetricsHandler) Timer(name string) client.MetricsTimer {
	f := h.families.get(timerName(name), h.tags, func(n string, labels []string) prometheus.Collector {
		return prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: n, Help: "Temporal SDK timer " + name + ".", Buckets: timerBuckets,
		}, labels)
	})
	if f == nil {
		return client.MetricsNopHandler.Timer(name)
	}
	o := f.vec.(*prometheus.HistogramVec).WithLabelValues(f.values(h.tags)...)
	return timerFunc(func(d time.Duration) { o.Observe(d.Seconds()) })
}

// SanitizeName turns an SDK metric name into a Prometheus one that starts
// with MetricsPrefix: every character but a letter, a digit or '_' becomes '_'.
func SanitizeName(name string) string {
	clean := strings.Map(func(r rune) rune {
		if r == '_' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9') {
			return r
		}
		return '_'
	}, name)
	if !strings.HasPrefix(clean, MetricsPrefix) {
		clean = MetricsPrefix + clean
	}
	return clean
}

func counterName(name string) string {
	n := SanitizeName(name)
	if strings.HasSuffix(n, "_total") {
		return n
	}
	return n + "_total"
}

func timerName(name string) string {
	n := SanitizeName(name)
	if strings.HasSuffix(n, "_seconds") {
		return n
	}
	return n + "_seconds"
}

// families holds the vectors created so far, by metric name.
type families struct {
	reg    prometheus.Registerer
	mu     sync.Mutex
	byName map[string]*family
}

// family is one metric's vector and its label names, in order.
type family struct {
	vec    prometheus.Collector
	labels []string
}

// get returns the family name, creating and registering it with the label
// names of tags on first use; nil when the name cannot be registered (taken
// by a metric of another kind).
func (fs *families) get(name string, tags map[string]string, build func(string, []string) prometheus.Collector) *family {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if f, ok := fs.byName[name]; ok {
		return f
	}
	labels := make([]string, 0, len(tags))
	for k := range tags {
		labels = append(labels, SanitizeLabel(k))
	}
	slices.Sort(labels)
	labels = slices.Compact(labels)
	f := &family{vec: build(name, labels), labels: labels}
	if err := fs.reg.Register(f.vec); err != nil {
		var already prometheus.AlreadyRegisteredError
		if !errors.As(err, &already) {
			fs.byName[name] = nil
			return nil
		}
		f.vec = already.ExistingCollector
	}
	fs.byName[name] = f
	return f
}

// values are the label values of tags in the family's label order: "" for a
// label tags lack; tags the family has no label for are dropped.
func (f *family) values(tags map[string]string) []string {
	byLabel := make(map[string]string, len(tags))
	for k, v := range tags {
		byLabel[SanitizeLabel(k)] = v
	}
	values := make([]string, len(f.labels))
	for i, l := range f.labels {
		values[i] = byLabel[l]
	}
	return values
}

// SanitizeLabel turns a tag key into a Prometheus label name.
func SanitizeLabel(key string) string {
	clean := strings.Map(func(r rune) rune {
		if r == '_' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9') {
			return r
		}
		return '_'
	}, key)
	if clean == "" || (clean[0] >= '0' && clean[0] <= '9') {
		clean = "_" + clean
	}
	return clean
}

// counterFunc, gaugeFunc and timerFunc adapt a function to the SDK's metric
// interfaces.
type (
	counterFunc func(int64)
	gaugeFunc   func(float64)
	timerFunc   func(time.Duration)
)

func (f counterFunc) Inc(d int64)          { f(d) }
func (f gaugeFunc) Update(v float64)       { f(v) }
func (f timerFunc) Record(d time.Duration) { f(d) }
