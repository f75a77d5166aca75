// Package profiling is Mandible's opt-in Go profiling listener ([debug]
// pprof_listen): net/http/pprof's handlers under /debug/pprof/ on a plain-HTTP
// listener of their own, so that an operator can see where a replica's CPU and
// memory go (go tool pprof http://<addr>/debug/pprof/profile) without exposing the
// profiles on the API's port.
package profiling

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/mantis-deploy/mantis/internal/metricsserver"
)

// Path is where the profile index is served.
const Path = "/debug/pprof/"

// Server is a bound profiling listener.
type Server struct {
	ln  net.Listener
	srv *http.Server
}

// Listen binds addr ("127.0.0.1:0" picks a free port) and prepares the handlers.
func Listen(addr string) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listening for profiling on %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+Path, pprof.Index)
	mux.HandleFunc("GET "+Path+"cmdline", pprof.Cmdline)
	mux.HandleFunc("GET "+Path+"profile", pprof.Profile)
	mux.HandleFunc("GET "+Path+"symbol", pprof.Symbol)
	mux.HandleFunc("GET "+Path+"trace", pprof.Trace)
	// A CPU profile or trace runs for its ?seconds=, 30 by default: no write timeout.
	return &Server{ln: ln, srv: &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}}, nil
}

// Addr is the bound address.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Run serves until ctx ends, then stops within a few seconds.
func (s *Server) Run(ctx context.Context, logger *slog.Logger) error {
	logger.WarnContext(ctx, "serving Go profiles: keep this address private", "address", "http://"+s.Addr()+Path)
	return metricsserver.ServeUntil(ctx, s.srv, s.ln, "profiling")
}
