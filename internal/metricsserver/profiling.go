// ProfilingServer is Mandible's opt-in Go profiling listener ([debug]
// pprof_listen): net/http/pprof's handlers under /debug/pprof/ on a plain-HTTP
// listener of their own, so that an operator can see where a replica's CPU and
// memory go (go tool pprof http://<addr>/debug/pprof/profile) without exposing the
// profiles on the API's port.

package metricsserver

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"
)

// ProfilingPath is where the profile index is served.
const ProfilingPath = "/debug/pprof/"

// ProfilingServer is a bound profiling listener.
type ProfilingServer struct {
	ln  net.Listener
	srv *http.Server
}

// ListenProfiling binds addr ("127.0.0.1:0" picks a free port) and prepares the handlers.
func ListenProfiling(addr string) (*ProfilingServer, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listening for profiling on %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+ProfilingPath, pprof.Index)
	mux.HandleFunc("GET "+ProfilingPath+"cmdline", pprof.Cmdline)
	mux.HandleFunc("GET "+ProfilingPath+"profile", pprof.Profile)
	mux.HandleFunc("GET "+ProfilingPath+"symbol", pprof.Symbol)
	mux.HandleFunc("GET "+ProfilingPath+"trace", pprof.Trace)
	// A CPU profile or trace runs for its ?seconds=, 30 by default: no write timeout.
	return &ProfilingServer{ln: ln, srv: &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}}, nil
}

// Addr is the bound address.
func (s *ProfilingServer) Addr() string { return s.ln.Addr().String() }

// Run serves until ctx ends, then stops within a few seconds.
func (s *ProfilingServer) Run(ctx context.Context, logger *slog.Logger) error {
	logger.WarnContext(ctx, "serving Go profiles: keep this address private", "address", "http://"+s.Addr()+ProfilingPath)
	return ServeUntil(ctx, s.srv, s.ln, "profiling")
}
