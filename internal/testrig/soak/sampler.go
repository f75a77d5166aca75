package soak

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/mantis-deploy/mantis/internal/backoff"
)

// scrapeTimeout bounds one /metrics request.
const scrapeTimeout = 5 * time.Second

// Process is one process the soak follows.
type Process struct {
	// Name is the process's name in the report.
	Name string
	// Pid returns its current process id (0 when it is not running).
	Pid func() int
	// MetricsURL serves its Prometheus metrics (go_goroutines).
	MetricsURL string
	// AppName is the application_name of its database sessions; "" for a process
	// without a database.
	AppName string
}

// Sampler reads every process's figures at an interval and keeps them.
type Sampler struct {
	procs  []Process
	db     Querier
	client *http.Client
	start  time.Time

	mu      sync.Mutex
	samples map[string][]Sample
	// failures counts the readings that failed, per process, for the report.
	failures map[string]int
}

// NewSampler follows procs, counting database sessions through db; elapsed time is
// measured from start.
func NewSampler(procs []Process, db Querier, start time.Time) *Sampler {
	return &Sampler{procs: procs, db: db, client: &http.Client{Timeout: scrapeTimeout}, start: start,
		samples: map[string][]Sample{}, failures: map[string]int{}}
}

// Run samples every interval until ctx ends.
func (s *Sampler) Run(ctx context.Context, every time.Duration) {
	backoff.Tick(ctx, every, s.SampleOnce)
}

// SampleOnce reads every process once. A figure that cannot be read is Unknown
// and counted as a failure.
func (s *Sampler) SampleOnce(ctx context.Context) {
	elapsed := time.Since(s.start)
	conns, connErr := DBConnections(ctx, s.db)
	for _, p := range s.procs {
		smp := Sample{Elapsed: elapsed, RSS: Unknown, Goroutines: Unknown, FDs: Unknown, DBConns: Unknown}
		failed := false
		pid := p.Pid()
		if rss, err := ReadRSS(pid); err == nil && pid > 0 {
			smp.RSS = rss
		} else {
			failed = true
		}
		if n, err := CountFDs(pid); err == nil && pid > 0 {
			smp.FDs = n
		} else {
			failed = true
		}
		sctx, cancel := context.WithTimeout(ctx, scrapeTimeout)
		if n, err := ScrapeGoroutines(sctx, s.client, p.MetricsURL); err == nil {
			smp.Goroutines = n
		} else {
			failed = true
		}
		cancel()
		if p.AppName != "" {
			if connErr == nil {
				smp.DBConns = conns[p.AppName]
			} else {
				failed = true
			}
		}
		s.mu.Lock()
		s.samples[p.Name] = append(s.samples[p.Name], smp)
		if failed {
			s.failures[p.Name]++
		}
		s.mu.Unlock()
	}
}

// Samples returns what was read of the named process.
func (s *Sampler) Samples(name string) []Sample {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Sample(nil), s.samples[name]...)
}

// Failures returns how many readings of the named process missed a figure.
func (s *Sampler) Failures(name string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.failures[name]
}
