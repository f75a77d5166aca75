// Package soak holds a Mantis cluster under steady load for a long time and shows,
// per process and per minute, whether it stays flat: resident memory, goroutines,
// open file descriptors and database connections, next to the dispatch latency of
// each minute. `make soak` runs it (internal/testrig/soak's TestSoak); the probes, the
// per-minute series and the verdicts live here so that they are tested on their own.
package soak

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
)

// goroutinesMetric is the Prometheus Go collector's gauge of live goroutines.
const goroutinesMetric = "go_goroutines"

// ReadRSS returns the resident set size of process pid, from VmRSS in
// /proc/<pid>/status, in bytes.
func ReadRSS(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, fmt.Errorf("reading the status of pid %d: %w", pid, err)
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:")
		if !ok {
			continue
		}
		fields := strings.Fields(rest)
		if len(fields) != 2 || fields[1] != "kB" {
			return 0, fmt.Errorf("pid %d: unexpected VmRSS line %q", pid, sc.Text())
		}
		kb, err := strconv.ParseInt(fields[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("pid %d: parsing VmRSS %q: %w", pid, fields[0], err)
		}
		return kb << 10, nil
	}
	return 0, fmt.Errorf("pid %d: no VmRSS in its status (a zombie?)", pid)
}

// CountFDs returns how many file descriptors process pid has open
// (the entries of /proc/<pid>/fd).
func CountFDs(pid int) (int, error) {
	entries, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return 0, fmt.Errorf("listing the descriptors of pid %d: %w", pid, err)
	}
	return len(entries), nil
}

// ScrapeGoroutines reads go_goroutines from the Prometheus text exposition at url.
func ScrapeGoroutines(ctx context.Context, c *http.Client, url string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, fmt.Errorf("scraping %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("scraping %s: %s", url, resp.Status)
	}
	return parseGauge(resp.Body, goroutinesMetric)
}

// parseGauge finds the unlabelled sample of name in a text exposition.
func parseGauge(r io.Reader, name string) (int, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), name+" ")
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
		if err != nil {
			return 0, fmt.Errorf("parsing %s %q: %w", name, rest, err)
		}
		return int(v), nil
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("reading metrics: %w", err)
	}
	return 0, fmt.Errorf("no %s sample in the metrics", name)
}

// Querier is what DBConnections needs of a pool or a connection.
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// DBConnections counts the sessions on the current database by application_name
// (as pg_stat_activity shows them; the asking session included).
func DBConnections(ctx context.Context, db Querier) (map[string]int, error) {
	rows, err := db.Query(ctx, `SELECT application_name, count(*) FROM pg_stat_activity
		WHERE datname = current_database() GROUP BY application_name`)
	if err != nil {
		return nil, fmt.Errorf("counting database sessions: %w", err)
	}
	out := map[string]int{}
	for rows.Next() {
		var name string
		var n int
		if err := rows.Scan(&name, &n); err != nil {
			return nil, fmt.Errorf("counting database sessions: %w", err)
		}
		out[name] = n
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("counting database sessions: %w", err)
	}
	return out, nil
}
