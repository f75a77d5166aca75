package main

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/mantis-deploy/mantis/activities"
	"github.com/mantis-deploy/mantis/internal/agent"
	"github.com/mantis-deploy/mantis/internal/identity"
	"github.com/mantis-deploy/mantis/internal/mandible/httpapi"
	"github.com/mantis-deploy/mantis/internal/metricsserver"
	"github.com/mantis-deploy/mantis/internal/rpc"
	"github.com/mantis-deploy/mantis/internal/thorax"
)

// family is one metric family as the page lists it.
type family struct {
	Name, Type, Help string
	Labels           []string
	Processes        []string
}

// processMetrics registers, for each process, every metric family it exports, with
// the functions its packages export for that: the same constructors the process
// calls, without its servers.
var processMetrics = []struct {
	Name     string
	Register func(prometheus.Registerer)
}{
	{"Mandible", func(reg prometheus.Registerer) {
		reg.MustRegister(metricsserver.NewBuildInfo())
		activities.MetricDescriptions(reg)
		httpapi.MetricDescriptions(reg)
		rpc.NewMetrics(reg)
		identity.NewMetrics(reg)
	}},
	{"Thorax", func(reg prometheus.Registerer) {
		reg.MustRegister(metricsserver.NewBuildInfo())
		thorax.MetricDescriptions(reg)
	}},
	{"agent", func(reg prometheus.Registerer) {
		reg.MustRegister(metricsserver.NewBuildInfo())
		agent.NewMetrics(reg)
		identity.NewMetrics(reg)
	}},
}

// collected is a prometheus.Registerer that keeps what is registered with it.
type collected struct{ collectors []prometheus.Collector }

func (c *collected) Register(col prometheus.Collector) error {
	c.collectors = append(c.collectors, col)
	return nil
}

func (c *collected) MustRegister(cols ...prometheus.Collector) {
	c.collectors = append(c.collectors, cols...)
}

func (c *collected) Unregister(prometheus.Collector) bool { return false }

// families lists the metric families of every process, by name.
func families() ([]family, error) {
	byName := map[string]*family{}
	for _, p := range processMetrics {
		var reg collected
		p.Register(&reg)
		for _, col := range reg.collectors {
			typ, err := metricType(col)
			if err != nil {
				return nil, err
			}
			for _, d := range describe(col) {
				f, err := parseDesc(d)
				if err != nil {
					return nil, err
				}
				if typ == "" {
					return nil, fmt.Errorf("%s: the collector's type is unknown (give it a MetricType method)", f.Name)
				}
				f.Type = typ
				if have, ok := byName[f.Name]; ok {
					if have.Type != f.Type || have.Help != f.Help || !slices.Equal(have.Labels, f.Labels) {
						return nil, fmt.Errorf("%s is described two ways", f.Name)
					}
					if !slices.Contains(have.Processes, p.Name) {
						have.Processes = append(have.Processes, p.Name)
					}
					continue
				}
				f.Processes = []string{p.Name}
				byName[f.Name] = &f
			}
		}
	}
	out := make([]family, 0, len(byName))
	for _, f := range byName {
		out = append(out, *f)
	}
	slices.SortFunc(out, func(a, b family) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

func describe(c prometheus.Collector) []*prometheus.Desc {
	ch := make(chan *prometheus.Desc)
	go func() {
		c.Describe(ch)
		close(ch)
	}()
	var out []*prometheus.Desc
	for d := range ch {
		out = append(out, d)
	}
	return out
}

// metricType is the type of the families c collects: from its Go type for the
// client library's vectors, from one metric it writes for its single metrics, and
// from its MetricType method for a collector of its own.
func metricType(c prometheus.Collector) (string, error) {
	switch c := c.(type) {
	case *prometheus.CounterVec:
		return "counter", nil
	case *prometheus.GaugeVec:
		return "gauge", nil
	case *prometheus.HistogramVec:
		return "histogram", nil
	case *prometheus.SummaryVec:
		return "summary", nil
	case interface{ MetricType() string }:
		return c.MetricType(), nil
	case prometheus.Metric:
		var m dto.Metric
		if err := c.Write(&m); err != nil {
			return "", err
		}
		switch {
		case m.Counter != nil:
			return "counter", nil
		case m.Gauge != nil:
			return "gauge", nil
		case m.Histogram != nil:
			return "histogram", nil
		case m.Summary != nil:
			return "summary", nil
		}
	}
	return "", nil
}

// descText reads what a Desc's String says: the client library gives no other way
// to a description's name, help and variable labels.
var descText = regexp.MustCompile(`^Desc\{fqName: ("(?:[^"\\]|\\.)*"), help: ("(?:[^"\\]|\\.)*"), unit: "(?:[^"\\]|\\.)*", constLabels: \{(.*)\}, variableLabels: \{(.*)\}\}$`)

// constLabel is one name="value" pair of a Desc's constant labels.
var constLabel = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="(?:[^"\\]|\\.)*"`)

func parseDesc(d *prometheus.Desc) (family, error) {
	m := descText.FindStringSubmatch(d.String())
	if m == nil {
		return family{}, fmt.Errorf("unexpected description %s", d)
	}
	name, err := strconv.Unquote(m[1])
	if err != nil {
		return family{}, err
	}
	help, err := strconv.Unquote(m[2])
	if err != nil {
		return family{}, err
	}
	var labels []string
	if m[4] != "" {
		labels = strings.Split(m[4], ",")
	}
	// A constant label's name is documented; its value is the build's (mantis_build_info's
	// version and commit), which the page must not carry.
	for _, c := range constLabel.FindAllStringSubmatch(m[3], -1) {
		labels = append(labels, c[1])
	}
	return family{Name: name, Help: help, Labels: labels}, nil
}

// metricsPage is the reference of every metric family.
func metricsPage() (string, error) {
	fams, err := families()
	if err != nil {
		return "", err
	}
	var b strings.Builder
	b.WriteString(generatedMarkdown)
	b.WriteString(metricsIntro)
	b.WriteString("| name | type | labels | process | help |\n|---|---|---|---|---|\n")
	for _, f := range fams {
		labels := "–"
		if len(f.Labels) > 0 {
			labels = strings.Join(f.Labels, ", ")
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s |\n", f.Name, f.Type, labels, strings.Join(f.Processes, ", "), cell(f.Help))
	}
	b.WriteString(metricsOthers)
	return b.String(), nil
}

const metricsIntro = `# Metrics reference

Mandible serves ` + "`/metrics`" + ` on its HTTP port (` + "`http.listen`" + `). Thorax and the agent serve
it on the plain-HTTP listener of ` + "`metrics.listen`" + ` when it is set (off by default). Labels
are bounded: route patterns, method names, codes, outcomes and states, never ids.

The table lists every family of Mantis's own, from the collectors each process
registers: ` + "`tools/docgen`" + ` builds them as the process does, without its servers, and
reads their descriptions. A vector has no series until what it counts happens.

`

const metricsOthers = `
Besides Mantis's own families, each process exports these:

| name | type | labels | process | help |
|---|---|---|---|---|
| ` + "`go_*`" + `, ` + "`process_*`" + ` | counter, gauge, summary | – | Mandible, Thorax, agent | the Prometheus Go and process collectors: goroutines, memory, garbage collection, CPU, resident memory, open files |
| ` + "`temporal_*`" + ` | counter, gauge, histogram | the SDK's tags (namespace, operation, task_queue, workflow_type, …) | Mandible | the Temporal SDK's metrics, such as ` + "`temporal_request_total`" + ` and ` + "`temporal_request_latency_seconds`" + `. The SDK creates each family the first time it records it, so they exist only at run time and are not listed one by one |
`
