package httpapi

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// DLQMessagesMetric is how many messages the dead-letter queue holds.
const DLQMessagesMetric = "mantis_dlq_messages"

// dlqScrapeTimeout bounds the broker call of one scrape.
const dlqScrapeTimeout = 3 * time.Second

// dlqCollector reads the dead-letter queue's depth from the broker when scraped.
type dlqCollector struct {
	dlq  DLQ
	desc *prometheus.Desc
}

// NewDLQCollector returns the gauge of the dead-letter queue's depth, read from dlq
// when scraped.
func NewDLQCollector(dlq DLQ) prometheus.Collector { return newDLQCollector(dlq) }

func newDLQCollector(dlq DLQ) *dlqCollector {
	return &dlqCollector{dlq: dlq, desc: prometheus.NewDesc(DLQMessagesMetric,
		"Messages in the dead-letter queue: nudges given up on after their retries.", nil, nil)}
}

func (c *dlqCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

// MetricType is the type of what Collect writes, which Describe cannot say.
func (c *dlqCollector) MetricType() string { return "gauge" }

// MetricDescriptions registers with reg every metric of the API (Handler's request and
// refusal metrics, the dead-letter queue's gauge), built without a server or a broker:
// their descriptions are whole, and the gauge must not be collected. tools/docgen
// lists them.
func MetricDescriptions(reg prometheus.Registerer) {
	discard := slog.New(slog.DiscardHandler)
	newInstrument(discard, reg)
	newGate(nil, discard, reg)
	reg.MustRegister(newDLQCollector(nil))
}

func (c *dlqCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), dlqScrapeTimeout)
	defer cancel()
	listing, err := c.dlq.List(ctx, 0)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.desc, err)
		return
	}
	ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(listing.Depth))
}
