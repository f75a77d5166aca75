package identity

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// Metric names, as dashboards and alerts use them.
const (
	// RefusalsMetric counts calls refused for the caller's identity.
	RefusalsMetric = "mantis_auth_refusals_total"
	// ExpiryMetric is when a process's own certificate expires.
	ExpiryMetric = "mantis_certificate_expiry_timestamp_seconds"
)

// Metrics are the identity metrics of one process. A nil *Metrics records nothing.
type Metrics struct {
	refusals *prometheus.CounterVec
	expiry   *prometheus.GaugeVec
}

// NewMetrics registers the identity metrics with reg, or reuses those already
// registered there, so every server of a process shares one counter.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	return &Metrics{
		refusals: register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: RefusalsMetric,
			Help: "Calls refused for the identity their certificate presents, by link, expected and presented role or binding.",
		}, []string{"link", "expected", "presented"})),
		expiry: register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: ExpiryMetric,
			Help: "When this process's own certificate expires, as a Unix time.",
		}, []string{"role", "name"})),
	}
}

func register[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	if err := reg.Register(c); err != nil {
		var already prometheus.AlreadyRegisteredError
		if errors.As(err, &already) {
			if existing, ok := already.ExistingCollector.(C); ok {
				return existing
			}
		}
		panic(err) // a programming error: a clashing metric name
	}
	return c
}

func (m *Metrics) refused(link, expected, presented string) {
	if m == nil {
		return
	}
	m.refusals.WithLabelValues(link, expected, presented).Inc()
}

func (m *Metrics) setExpiry(role, name string, unix float64) {
	if m == nil {
		return
	}
	m.expiry.WithLabelValues(role, name).Set(unix)
}

// Refusals returns the refusal counter, by link, expected and presented.
func (m *Metrics) Refusals() *prometheus.CounterVec { return m.refusals }

// Expiry returns the certificate expiry gauge, by role and name.
func (m *Metrics) Expiry() *prometheus.GaugeVec { return m.expiry }

// Describe implements prometheus.Collector, so that the metrics of a process can
// be added to a registry that serves them (a metrics listener).
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	m.refusals.Describe(ch)
	m.expiry.Describe(ch)
}

// Collect implements prometheus.Collector.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	m.refusals.Collect(ch)
	m.expiry.Collect(ch)
}
