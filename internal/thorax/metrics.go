package thorax

import (
	"context"
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mantis-deploy/mantis/internal/broker"
	"github.com/mantis-deploy/mantis/internal/identity"
	"github.com/mantis-deploy/mantis/internal/rpc"
)

// Metric names, as dashboards and alerts use them.
const (
	// NudgesMetric counts broker nudges processed, by outcome.
	NudgesMetric = "mantis_thorax_nudges_total"
	// FetchesMetric counts claims from Mandible (FetchPendingCommands), by outcome.
	FetchesMetric = "mantis_thorax_fetches_total"
	// CommandsFetchedMetric counts the commands those claims handed over.
	CommandsFetchedMetric = "mantis_thorax_commands_fetched_total"
	// CommandsHeldMetric is how many commands the instance holds now.
	CommandsHeldMetric = "mantis_thorax_commands_held"
	// RegisteredMetric is 1 while the instance holds an id from Mandible.
	RegisteredMetric = "mantis_thorax_registered"
	// DrainDurationMetric times drains, from SIGTERM to the last command out.
	DrainDurationMetric = "mantis_thorax_drain_duration_seconds"
	// ResultsRefusedMetric counts results Mandible refused to store (a stale
	// lease, an unknown command, a malformed result).
	ResultsRefusedMetric = "mantis_thorax_results_refused_total"
	// DrainAbandonedMetric counts commands still out to agents when a drain timed out.
	DrainAbandonedMetric = "mantis_thorax_drain_abandoned_commands_total"
	// RehandedMetric counts commands handed to a poll agent again because the agent,
	// naming what it holds, did not name them: the answer that carried them was lost.
	RehandedMetric = "mantis_thorax_commands_rehanded_total"
)

// Outcomes of a nudge (the outcome label of NudgesMetric).
const (
	nudgeAcknowledged  = "acknowledged"  // claimed, or nothing left to claim
	nudgeBusy          = "busy"          // draining or at capacity: polling claims it
	nudgeUnprocessable = "unprocessable" // dead-lettered at once
	nudgeUnregistered  = "not_registered"
	nudgeFailed        = "failed"   // a failed attempt under the retry rules
	nudgeGivenUp       = "given_up" // about to be dead-lettered after its retries
)

// Outcomes of a fetch (the outcome label of FetchesMetric).
const (
	fetchOK      = "ok"
	fetchError   = "error"
	fetchSkipped = "skipped" // not registered, draining or at capacity: no call made
)

// metrics are the instance's own metrics. A nil *metrics records nothing.
type metrics struct {
	nudges         *prometheus.CounterVec
	fetches        *prometheus.CounterVec
	fetched        prometheus.Counter
	refused        prometheus.Counter
	drainDuration  prometheus.Histogram
	drainAbandoned prometheus.Counter
	rehanded       prometheus.Counter
	held           prometheus.GaugeFunc
	registered     prometheus.GaugeFunc
	rpc            *rpc.Metrics
}

// newMetrics registers the instance's metrics with reg.
func newMetrics(t *Thorax, reg prometheus.Registerer) *metrics {
	m := &metrics{
		nudges: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: NudgesMetric, Help: "Broker nudges processed, by outcome (acknowledged, busy, unprocessable, not_registered, failed, given_up).",
		}, []string{"outcome"}),
		fetches: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: FetchesMetric, Help: "Claims of pending commands from Mandible, by outcome (ok, error, skipped).",
		}, []string{"outcome"}),
		fetched: prometheus.NewCounter(prometheus.CounterOpts{
			Name: CommandsFetchedMetric, Help: "Commands Mandible handed over on a claim.",
		}),
		refused: prometheus.NewCounter(prometheus.CounterOpts{
			Name: ResultsRefusedMetric, Help: "Command results Mandible refused to store: a stale lease, an unknown command or a malformed result.",
		}),
		drainDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: DrainDurationMetric, Help: "Time a drain took, from its start to the last command out or its timeout.",
			Buckets: []float64{.1, .5, 1, 5, 10, 30, 60, 120, 300, 600},
		}),
		drainAbandoned: prometheus.NewCounter(prometheus.CounterOpts{
			Name: DrainAbandonedMetric, Help: "Commands still out to agents when a drain timed out.",
		}),
		rehanded: prometheus.NewCounter(prometheus.CounterOpts{
			Name: RehandedMetric, Help: "Commands handed to a poll agent again: the agent's poll did not name them among those it holds, so the answer that carried them never reached it.",
		}),
		held: prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: CommandsHeldMetric, Help: "Commands this instance holds: claimed and not yet ended.",
		}, func() float64 { return float64(t.book.heldCount()) }),
		registered: prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: RegisteredMetric, Help: "1 while this instance holds an id from Mandible, 0 while it registers.",
		}, func() float64 {
			if t.InstanceID() == "" {
				return 0
			}
			return 1
		}),
		rpc: rpc.NewMetrics(reg),
	}
	reg.MustRegister(m.nudges, m.fetches, m.fetched, m.refused, m.drainDuration, m.drainAbandoned, m.rehanded, m.held, m.registered)
	return m
}

// Describe implements prometheus.Collector, so that a metrics listener can
// serve the instance's metrics.
func (m *metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range m.collectors() {
		c.Describe(ch)
	}
}

// Collect implements prometheus.Collector.
func (m *metrics) Collect(ch chan<- prometheus.Metric) {
	for _, c := range m.collectors() {
		c.Collect(ch)
	}
}

func (m *metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.nudges, m.fetches, m.fetched, m.refused, m.drainDuration, m.drainAbandoned, m.rehanded, m.held, m.registered, m.rpc}
}

// fetchedCommands counts one fetch and the commands it claimed.
func (m *metrics) fetchedCommands(n int, err error) {
	if m == nil {
		return
	}
	switch {
	case errors.Is(err, ErrNotRegistered), errors.Is(err, ErrDraining), errors.Is(err, ErrAtCapacity):
		m.fetches.WithLabelValues(fetchSkipped).Inc()
	case err != nil:
		m.fetches.WithLabelValues(fetchError).Inc()
	default:
		m.fetches.WithLabelValues(fetchOK).Inc()
		m.fetched.Add(float64(n))
	}
}

// rehandedCommands counts n commands handed to a poll agent again.
func (m *metrics) rehandedCommands(n int) {
	if m != nil && n > 0 {
		m.rehanded.Add(float64(n))
	}
}

// resultRefused counts a result Mandible refused.
func (m *metrics) resultRefused() {
	if m != nil {
		m.refused.Inc()
	}
}

// drained records a drain that took d and left abandoned commands out.
func (m *metrics) drained(d time.Duration, abandoned int) {
	if m == nil {
		return
	}
	m.drainDuration.Observe(d.Seconds())
	m.drainAbandoned.Add(float64(abandoned))
}

// countedNudges counts the outcome of every nudge p processes.
type countedNudges struct {
	p       broker.NudgeProcessor
	metrics *metrics
}

// Process processes n and counts its outcome.
func (c countedNudges) Process(ctx context.Context, n broker.Nudge) error {
	err := c.p.Process(ctx, n)
	if c.metrics != nil {
		c.metrics.nudges.WithLabelValues(nudgeOutcome(err)).Inc()
	}
	return err
}

// GiveUp gives n up and counts it.
func (c countedNudges) GiveUp(ctx context.Context, n broker.Nudge, cause error) {
	c.p.GiveUp(ctx, n, cause)
	if c.metrics != nil {
		c.metrics.nudges.WithLabelValues(nudgeGivenUp).Inc()
	}
}

func nudgeOutcome(err error) string {
	switch {
	case err == nil:
		return nudgeAcknowledged
	case errors.Is(err, broker.ErrBusy):
		return nudgeBusy
	case errors.Is(err, broker.ErrUnprocessable):
		return nudgeUnprocessable
	case errors.Is(err, ErrNotRegistered):
		return nudgeUnregistered
	}
	return nudgeFailed
}

// heldCount is how many commands the book holds.
func (b *book) heldCount() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.held)
}

// Metrics returns the instance's own metrics (claims, nudges, commands held,
// drains, gRPC calls) as a collector, for a metrics listener to serve.
func (t *Thorax) Metrics() prometheus.Collector { return t.metrics }

// Readiness reports whether the instance is ready for work: registered with
// Mandible and not draining.
func (t *Thorax) Readiness() error {
	if t.book.isDraining() {
		return ErrDraining
	}
	if t.InstanceID() == "" {
		return ErrNotRegistered
	}
	return nil
}

// MetricDescriptions registers with reg every metric an instance exports (its own,
// the gRPC and the identity metrics), built without an instance: their descriptions
// are whole, and the gauges read an idle instance. tools/docgen lists them.
func MetricDescriptions(reg prometheus.Registerer) {
	identity.NewMetrics(reg)
	newMetrics(&Thorax{book: newBook(1)}, reg)
}
