package activities

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/mantis-deploy/mantis/internal/domain"
	"github.com/mantis-deploy/mantis/schema"
)

// State gauge names, as dashboards and alerts use them.
const (
	// ThoraxInstancesMetric counts Thorax instances by status (live, draining, dead).
	ThoraxInstancesMetric = "mantis_thorax_instances"
	// RequestsNearExpiryMetric counts requests not yet dispatched within
	// NearExpiryWindow of their expiry.
	RequestsNearExpiryMetric = "mantis_dispatch_requests_near_expiry"
)

// NearExpiryWindow is how close to its expiry (24 h after creation) a request
// not yet dispatched counts as near expiry: 20 h old.
const NearExpiryWindow = 4 * time.Hour

// scrapeTimeout bounds the database reads of one scrape.
const scrapeTimeout = 2 * time.Second

// stateCollector reads the Thorax instances and the requests near expiry from
// the database when scraped.
type stateCollector struct {
	db         *pgxpool.Pool
	instances  *prometheus.Desc
	nearExpiry *prometheus.Desc
}

func newStateCollector(db *pgxpool.Pool) *stateCollector {
	return &stateCollector{
		db: db,
		instances: prometheus.NewDesc(ThoraxInstancesMetric,
			"Thorax instances by status (live, draining, dead).", []string{"status"}, nil),
		nearExpiry: prometheus.NewDesc(RequestsNearExpiryMetric,
			"Dispatch requests not yet dispatched that expire within 4 h (20 h after creation).", nil, nil),
	}
}

// MetricType is the type of what Collect writes, which Describe cannot say.
func (c *stateCollector) MetricType() string { return "gauge" }

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.instances
	ch <- c.nearExpiry
}

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
	defer cancel()
	if counts, err := schema.ThoraxInstancesByStatus(ctx, c.db); err != nil {
		ch <- prometheus.NewInvalidMetric(c.instances, err)
	} else {
		for _, status := range domain.InstanceStatuses {
			ch <- prometheus.MustNewConstMetric(c.instances, prometheus.GaugeValue, float64(counts[status]), status)
		}
	}
	if n, err := schema.RequestsNearExpiry(ctx, c.db, NearExpiryWindow); err != nil {
		ch <- prometheus.NewInvalidMetric(c.nearExpiry, err)
	} else {
		ch <- prometheus.MustNewConstMetric(c.nearExpiry, prometheus.GaugeValue, float64(n))
	}
}
