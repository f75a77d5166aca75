package scale

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
)

// Mandible's dispatch claim counters (activities/metrics.go).
const (
	ClaimsWonMetric  = "mantis_dispatch_claims_won_total"
	ClaimsLostMetric = "mantis_dispatch_claims_lost_total"
)

// Claims are a replica's claim counters at one reading.
type Claims struct {
	Won, Lost float64
}

// Sub is what was counted since before.
func (c Claims) Sub(before Claims) Claims {
	return Claims{Won: c.Won - before.Won, Lost: c.Lost - before.Lost}
}

// Add sums two readings.
func (c Claims) Add(o Claims) Claims { return Claims{Won: c.Won + o.Won, Lost: c.Lost + o.Lost} }

// ScrapeClaims reads the claim counters from a replica's /metrics.
func ScrapeClaims(ctx context.Context, client *http.Client, url string) (Claims, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return Claims{}, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return Claims{}, fmt.Errorf("scraping %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return Claims{}, fmt.Errorf("scraping %s: %s", url, resp.Status)
	}
	sums, err := SumCounters(resp.Body, ClaimsWonMetric, ClaimsLostMetric)
	if err != nil {
		return Claims{}, fmt.Errorf("scraping %s: %w", url, err)
	}
	return Claims{Won: sums[ClaimsWonMetric], Lost: sums[ClaimsLostMetric]}, nil
}

// SumCounters adds up every sample of each named metric, whatever its labels, in a
// Prometheus text exposition. A metric without samples sums to 0.
func SumCounters(r io.Reader, names ...string) (map[string]float64, error) {
	out := make(map[string]float64, len(names))
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		for _, name := range names {
			rest, ok := strings.CutPrefix(line, name)
			if !ok || rest == "" || (rest[0] != ' ' && rest[0] != '{') {
				continue
			}
			if i := strings.LastIndexByte(rest, '}'); i >= 0 {
				rest = rest[i+1:]
			}
			fields := strings.Fields(rest)
			if len(fields) == 0 {
				return nil, fmt.Errorf("no value in %q", line)
			}
			v, err := strconv.ParseFloat(fields[0], 64)
			if err != nil {
				return nil, fmt.Errorf("parsing the value of %q: %w", line, err)
			}
			out[name] += v
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading metrics: %w", err)
	}
	return out, nil
}
