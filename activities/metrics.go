package activities

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/mantis-deploy/mantis/internal/contract/activityio"
	"github.com/mantis-deploy/mantis/internal/domain"
	"github.com/mantis-deploy/mantis/schema"
)

// Metrics are the dispatch counters Mandible exports on /metrics. A nil *Metrics
// records nothing.
type Metrics struct {
	claimsWon       *prometheus.CounterVec
	claimsLost      *prometheus.CounterVec
	reclaimed       prometheus.Counter
	attempts        *prometheus.CounterVec
	failures        prometheus.Counter
	expiries        prometheus.Counter
	enqueueDispatch prometheus.Histogram
	deployments     *deploymentMetrics
}

// NewMetrics registers the dispatch metrics with reg, including a queue-depth gauge
// read from db at scrape time.
func NewMetrics(reg prometheus.Registerer, db *pgxpool.Pool) *Metrics {
	m := &Metrics{
		claimsWon: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mantis_dispatch_claims_won_total", Help: "Dispatch requests this replica claimed.",
		}, []string{"replica"}),
		claimsLost: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mantis_dispatch_claims_lost_total", Help: "Dispatch requests loaded for a claim but won by another replica.",
		}, []string{"replica"}),
		reclaimed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "mantis_dispatch_orphans_reclaimed_total", Help: "Requests returned to pending after the processing timeout.",
		}),
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mantis_dispatch_delivery_attempts_total", Help: "Delivery attempts by outcome (dispatched, retry, failed, expired, stale).",
		}, []string{"outcome"}),
		failures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "mantis_dispatch_failures_total", Help: "Requests failed after spending their budget: a first delivery and 10 retries.",
		}),
		expiries: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "mantis_dispatch_expiries_total", Help: "Requests expired " + domain.DispatchRequestTTLText + " after creation.",
		}),
		enqueueDispatch: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "mantis_dispatch_enqueue_to_dispatch_seconds",
			Help:    "Time from enqueue to the command_queue row being written.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300},
		}),
	}
	reg.MustRegister(m.claimsWon, m.claimsLost, m.reclaimed, m.attempts, m.failures, m.expiries, m.enqueueDispatch)
	m.deployments = newDeploymentMetrics(reg)
	if db != nil {
		reg.MustRegister(scrapeCollectors(db)...)
	}
	return m
}

// scrapeCollectors are the gauges read from db at scrape time.
func scrapeCollectors(db *pgxpool.Pool) []prometheus.Collector {
	return []prometheus.Collector{&depthCollector{db: db, desc: prometheus.NewDesc("mantis_dispatch_queue_depth",
		"Dispatch requests by status and priority.", []string{"status", "priority"}, nil)}, newStateCollector(db)}
}

// MetricDescriptions registers with reg every metric NewMetrics registers, the
// gauges read from the database included, without a database: their descriptions
// are whole, and the gauges must not be collected. tools/docgen lists them.
func MetricDescriptions(reg prometheus.Registerer) {
	NewMetrics(reg, nil)
	reg.MustRegister(scrapeCollectors(nil)...)
}

func (m *Metrics) claimed(replica string, won, lost int) {
	if m == nil {
		return
	}
	m.claimsWon.WithLabelValues(replica).Add(float64(won))
	m.claimsLost.WithLabelValues(replica).Add(float64(lost))
}

func (m *Metrics) dispatched(queued time.Duration) {
	if m == nil {
		return
	}
	m.enqueueDispatch.Observe(queued.Seconds())
}

func (m *Metrics) delivered(r activityio.DeliverBatchResult) {
	if m == nil {
		return
	}
	m.attempts.WithLabelValues(domain.OutcomeDispatched).Add(float64(r.Dispatched))
	m.attempts.WithLabelValues(domain.OutcomeRetry).Add(float64(r.Retried))
	m.attempts.WithLabelValues(domain.OutcomeFailed).Add(float64(r.Failed))
	m.attempts.WithLabelValues(domain.OutcomeExpired).Add(float64(r.Expired))
	m.attempts.WithLabelValues(domain.OutcomeStale).Add(float64(r.Stale))
	m.failures.Add(float64(r.Failed))
	m.expiries.Add(float64(r.Expired))
}

func (m *Metrics) maintained(r activityio.MaintainDispatchQueueResult) {
	if m == nil {
		return
	}
	m.reclaimed.Add(float64(len(r.Reclaimed)))
	m.expiries.Add(float64(len(r.Expired)))
	for _, q := range r.Requeued {
		if q.Outcome == domain.OutcomeFailed {
			m.failures.Inc()
		}
		m.attempts.WithLabelValues(q.Outcome).Inc()
	}
}

// depthCollector reads queue depth from the database when scraped.
type depthCollector struct {
	db   *pgxpool.Pool
	desc *prometheus.Desc
}

func (c *depthCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

// MetricType is the type of what Collect writes, which Describe cannot say.
func (c *depthCollector) MetricType() string { return "gauge" }

func (c *depthCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	depth, err := schema.QueueDepth(ctx, c.db)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.desc, err)
		return
	}
	for _, status := range []string{domain.StatusPending, domain.StatusProcessing, domain.StatusDispatched, domain.StatusFailed, domain.StatusExpired} {
		for _, prio := range domain.Priorities {
			ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(depth[[2]string{status, prio}]), status, prio)
		}
	}
}
