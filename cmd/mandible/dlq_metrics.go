package main

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mantis-deploy/mantis/internal/mandible/httpapi"
)

// DLQMessagesMetric is how many messages the dead-letter queue holds.
const DLQMessagesMetric = "mantis_dlq_messages"

// dlqScrapeTimeout bounds the broker call of one scrape.
const dlqScrapeTimeout = 3 * time.Second

// dlqCollector reads the dead-letter queue's depth from the broker when scraped.
type dlqCollector struct {
	dlq  httpapi.DLQ
	desc *prometheus.Desc
}

func newDLQCollector(dlq httpapi.DLQ) *dlqCollector {
	return &dlqCollector{dlq: dlq, desc: prometheus.NewDesc(DLQMessagesMetric,
		"Messages in the dead-letter queue: nudges given up on after their retries.", nil, nil)}
}

func (c *dlqCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

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
