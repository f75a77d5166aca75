// Package metricsserver is the opt-in plain-HTTP listener of Thorax and the agent
// ([metrics] listen): /metrics with the Prometheus Go and process collectors and
// mantis_build_info, /version with the running build,
// /healthz, which answers 200 while the process serves, and /readyz, which
// answers 200 only while the process's readiness check passes (Thorax registered
// with Mandible, the agent polling or serving) and 503 naming why otherwise; and
// Mandible's opt-in profiling listener (profiling.go).
package metricsserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Paths the listener serves.
const (
	MetricsPath = "/metrics"
	HealthPath  = "/healthz"
	ReadyPath   = "/readyz"
)

// shutdownGrace bounds the listener's stop once its context ends.
const shutdownGrace = 5 * time.Second

// Server is a bound listener and the registry it exposes.
type Server struct {
	// Registry holds the Go and process collectors; a caller may add its own.
	Registry *prometheus.Registry
	ln       net.Listener
	srv      *http.Server
	logger   *slog.Logger
	ready    atomic.Pointer[func() error]
}

// Listen binds addr and prepares the handlers; Run serves them.
func Listen(addr string, logger *slog.Logger) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listening for metrics on %s: %w", addr, err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), NewBuildInfo())
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+VersionPath, ServeVersion)
	mux.Handle("GET "+MetricsPath, promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	mux.HandleFunc("GET "+HealthPath, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok\n"))
	})
	s := &Server{
		Registry: reg,
		ln:       ln,
		srv:      &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second},
		logger:   logger,
	}
	mux.HandleFunc("GET "+ReadyPath, s.serveReady)
	return s, nil
}

// SetReadiness makes /readyz answer 200 while check returns nil and 503 with
// its error otherwise. Until it is set, /readyz answers 503: the process has
// not said it is ready.
func (s *Server) SetReadiness(check func() error) { s.ready.Store(&check) }

// errNoReadiness is /readyz's answer before SetReadiness.
var errNoReadiness = errors.New("starting")

func (s *Server) serveReady(w http.ResponseWriter, _ *http.Request) {
	err := errNoReadiness
	if check := s.ready.Load(); check != nil {
		err = (*check)()
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if err != nil {
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte("not ready: " + err.Error() + "\n"))
		return
	}
	_, _ = w.Write([]byte("ok\n"))
}

// Addr is the bound address (useful when the configured port was 0).
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Run serves until ctx ends, then shuts the listener down within a bound.
func (s *Server) Run(ctx context.Context) error {
	s.logger.InfoContext(ctx, "serving metrics", "address", s.ln.Addr().String())
	return ServeUntil(ctx, s.srv, s.ln, "metrics")
}

// ServeUntil serves srv on ln until ctx ends, then shuts it down within a bound,
// closing what is still open past it (a long request, a CPU profile). what names
// the listener in its errors.
func ServeUntil(ctx context.Context, srv *http.Server, ln net.Listener, what string) error {
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serving %s: %w", what, err)
	case <-ctx.Done():
	}
	stopCtx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	if err := srv.Shutdown(stopCtx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		_ = srv.Close()
		return fmt.Errorf("stopping the %s listener: %w", what, err)
	}
	return nil
}
