package httpapi

import (
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mantis-deploy/mantis/internal/contract/api"
)

// StreamLimits cap the event streams open at once on a replica.
type StreamLimits struct {
	// Max caps every stream, whoever opened it (512 when zero).
	Max int
	// PerCaller caps the streams of one caller, the API token or the token a
	// console session names (32 when zero).
	PerCaller int
}

// Default stream caps, for Options that leave StreamLimits zero.
const (
	defaultMaxStreams          = 512
	defaultMaxStreamsPerCaller = 32
)

// streamRetryAfter is the Retry-After, in seconds, of a refused stream.
const streamRetryAfter = 5

// streamGate counts the open event streams, in all and by caller, and refuses one
// past either cap.
type streamGate struct {
	limits StreamLimits
	logger *slog.Logger
	// refusals counts each refused stream, as mantis_http_refusals_total.
	refusals *prometheus.CounterVec

	mu       sync.Mutex
	open     int
	byCaller map[string]int
}

func newStreamGate(limits StreamLimits, logger *slog.Logger, refusals *prometheus.CounterVec) *streamGate {
	if limits.Max <= 0 {
		limits.Max = defaultMaxStreams
	}
	if limits.PerCaller <= 0 {
		limits.PerCaller = defaultMaxStreamsPerCaller
	}
	return &streamGate{limits: limits, logger: logger, refusals: refusals, byCaller: map[string]int{}}
}

// acquire counts a stream of caller, or says why it is refused.
func (g *streamGate) acquire(caller string) string {
	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case g.byCaller[caller] >= g.limits.PerCaller:
		return fmt.Sprintf("%s already has %d event streams open, the most one caller may (sse.max_streams_per_caller): close one first",
			caller, g.limits.PerCaller)
	case g.open >= g.limits.Max:
		return fmt.Sprintf("this replica already serves %d event streams, the most it may (sse.max_streams): try again later", g.limits.Max)
	}
	g.open++
	g.byCaller[caller]++
	return ""
}

func (g *streamGate) release(caller string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.open--
	if g.byCaller[caller]--; g.byCaller[caller] <= 0 {
		delete(g.byCaller, caller)
	}
}

// wrap serves h to an authenticated caller within the caps, 429 past them.
func (g *streamGate) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		caller := actor(r)
		if why := g.acquire(caller); why != "" {
			g.refusals.WithLabelValues(refusedTooManyStreams).Inc()
			g.logger.WarnContext(r.Context(), "event stream refused", "actor", caller, "reason", why)
			w.Header().Set("Retry-After", strconv.Itoa(streamRetryAfter))
			api.WriteError(w, r, http.StatusTooManyRequests, api.CodeTooManyStreams, why)
			return
		}
		defer g.release(caller)
		h.ServeHTTP(w, r)
	})
}
