package e2e_test

import (
	"fmt"
	"io"
	"net/http"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// mantisPrefix starts the name of every metric family Mantis defines itself.
const mantisPrefix = "mantis_"

var (
	// sampleLine is one sample of the text exposition format: name, labels, value.
	sampleLine = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)`)
	// labelPair is one name="value" of a sample's labels.
	labelPair = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"`)
)

// scrapeText is the body of the /metrics answer at addr.
func scrapeText(t *testing.T, addr string) string {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(b)
}

// familiesIn are the families a scrape holds samples of: a vector without a
// series yet has no "# TYPE" line.
func familiesIn(text string) map[string]bool {
	out := map[string]bool{}
	for _, line := range strings.Split(text, "\n") {
		if fields := strings.Fields(line); len(fields) >= 3 && fields[0] == "#" && fields[1] == "TYPE" {
			out[fields[2]] = true
		}
	}
	return out
}

// sampleSum adds up the samples of series name in text whose labels include
// every pair of want; found says whether any sample matched.
func sampleSum(text, name string, want map[string]string) (sum float64, found bool) {
	for _, line := range strings.Split(text, "\n") {
		m := sampleLine.FindStringSubmatch(line)
		if m == nil || m[1] != name {
			continue
		}
		labels := map[string]string{}
		for _, p := range labelPair.FindAllStringSubmatch(m[2], -1) {
			labels[p[1]] = p[2]
		}
		matches := true
		for k, v := range want {
			matches = matches && labels[k] == v
		}
		v, err := strconv.ParseFloat(m[3], 64)
		if !matches || err != nil {
			continue
		}
		sum, found = sum+v, true
	}
	return sum, found
}

// minSample is a lower bound on the sum of a series' samples with some labels.
type minSample struct {
	name   string
	labels map[string]string
	min    float64
}

// unmet are the bounds of want that text does not meet, one line each.
func unmet(text string, want []minSample) []string {
	var out []string
	for _, w := range want {
		if v, found := sampleSum(text, w.name, w.labels); !found || v < w.min {
			out = append(out, fmt.Sprintf("%s%v = %v (found %t), want at least %v", w.name, w.labels, v, found, w.min))
		}
	}
	return out
}

// requireDeploymentMetrics requires Mandible at addr to have counted, after one
// deployment that succeeded, its start, its end by status, its duration and the
// targets of the steps it started. The counters move as the activities end, so the
// scrape is repeated until they are there.
func requireDeploymentMetrics(t *testing.T, addr string) {
	t.Helper()
	want := []minSample{
		{name: "mantis_deployments_started_total", min: 1},
		{name: "mantis_deployments_finished_total", labels: map[string]string{"status": "succeeded"}, min: 1},
		{name: "mantis_deployment_duration_seconds_count", labels: map[string]string{"status": "succeeded"}, min: 1},
		{name: "mantis_deployment_step_targets_count", min: 1},
		{name: "mantis_deployment_step_targets_sum", min: 1},
	}
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		resp, err := http.Get("http://" + addr + "/metrics")
		require.NoError(c, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(c, err)
		require.Empty(c, unmet(string(b), want), "deployment metrics after one deployment")
	}, 30*time.Second, 100*time.Millisecond)
}

// requireMantisFamiliesLintClean lints a scrape with Prometheus's own linter
// (names, units, help, counters ending in _total) and requires no problem in a
// family Mantis defines; the Go, process and Temporal SDK families are not ours
// to rename.
func requireMantisFamiliesLintClean(t *testing.T, process, text string) {
	t.Helper()
	problems, err := promlint.New(strings.NewReader(text)).Lint()
	require.NoError(t, err, "linting %s's scrape", process)
	var ours []string
	for _, p := range problems {
		if strings.HasPrefix(p.Metric, mantisPrefix) {
			ours = append(ours, p.Metric+": "+p.Text)
		}
	}
	sort.Strings(ours)
	require.Empty(t, ours, "%s exports families promlint finds fault with", process)
}

// undocumentedFamilies are the Mantis families in exported that the metrics
// reference does not list.
func undocumentedFamilies(exported map[string]bool, documented []string) []string {
	listed := map[string]bool{}
	for _, name := range documented {
		listed[name] = true
	}
	var out []string
	for name := range exported {
		if strings.HasPrefix(name, mantisPrefix) && !listed[name] {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}
