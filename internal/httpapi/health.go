// Package httpapi is Mandible's HTTP surface: the JSON API under /api/v1, the SSE
// streams under /sse, health probes and Prometheus metrics.
package httpapi

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Check reports whether one dependency is reachable; nil means ready.
type Check func(ctx context.Context) error

// Options wires the server to what it reports on.
type Options struct {
	Logger *slog.Logger
	// Checks are run by /readyz, by name (database, temporal, broker, ...).
	Checks   map[string]Check
	Registry *prometheus.Registry
}

// New returns Mandible's HTTP handler.
func New(opts Options) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	mux.HandleFunc("GET /readyz", readyHandler(opts.Checks))
	if opts.Registry != nil {
		mux.Handle("GET /metrics", promhttp.HandlerFor(opts.Registry, promhttp.HandlerOpts{Registry: opts.Registry}))
	}
	return mux
}

// readyHandler runs every check concurrently with a bound and answers 503 naming the
// checks that failed.
func readyHandler(checks map[string]Check) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 3*time.Second)
		defer cancel()
		var (
			mu      sync.Mutex
			wg      sync.WaitGroup
			results = map[string]string{}
			failed  bool
		)
		names := make([]string, 0, len(checks))
		for name := range checks {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			wg.Add(1)
			go func() {
				defer wg.Done()
				status := "ok"
				if err := checks[name](ctx); err != nil {
					status = err.Error()
				}
				mu.Lock()
				defer mu.Unlock()
				results[name] = status
				if status != "ok" {
					failed = true
				}
			}()
		}
		wg.Wait()
		code := http.StatusOK
		if failed {
			code = http.StatusServiceUnavailable
		}
		writeJSON(w, code, map[string]any{"ready": !failed, "checks": results})
	}
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}
