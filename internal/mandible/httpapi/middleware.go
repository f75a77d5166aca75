package httpapi

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"
)

// RequestIDHeader carries a request's id: taken from the request when it has a
// usable one, generated otherwise, and always echoed in the answer.
const RequestIDHeader = "X-Request-Id"

// maxRequestIDLen bounds an id taken from a request.
const maxRequestIDLen = 128

// HTTP metric names, as dashboards and alerts use them.
const (
	// RequestsMetric counts answered requests by route pattern, method and status class.
	RequestsMetric = "mantis_http_requests_total"
	// RequestDurationMetric times answered requests by route pattern and method.
	RequestDurationMetric = "mantis_http_request_duration_seconds"
)

// routeUnmatched is the route label of a request no pattern matched.
const routeUnmatched = "unmatched"

// methodOther is the method label of a request whose method is none of the
// standard ones: a client may send any token as its method, and each would be
// a series of its own.
const methodOther = "other"

// standardMethods are the methods counted under their own name (RFC 9110 and
// PATCH).
var standardMethods = map[string]bool{
	http.MethodGet: true, http.MethodHead: true, http.MethodPost: true, http.MethodPut: true,
	http.MethodPatch: true, http.MethodDelete: true, http.MethodConnect: true,
	http.MethodOptions: true, http.MethodTrace: true,
}

// methodLabel is the method label of method: itself when standard, else methodOther.
func methodLabel(method string) string {
	if standardMethods[method] {
		return method
	}
	return methodOther
}

// probeRoutes are logged at debug level: scrapers and probes call them all the time.
var probeRoutes = map[string]bool{"/healthz": true, "/readyz": true, "/metrics": true, "/version": true}

type requestKey struct{}

// requestInfo is what the middleware learns of a request as it is served; the
// handlers fill in the token's name.
type requestInfo struct {
	id    string
	actor string
}

// RequestID returns the id of the HTTP request ctx belongs to, or "".
func RequestID(ctx context.Context) string {
	if info, ok := ctx.Value(requestKey{}).(*requestInfo); ok {
		return info.id
	}
	return ""
}

// WithRequestID returns ctx carrying the request id id.
func WithRequestID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, requestKey{}, &requestInfo{id: id})
}

// noteActor records the name of the token that authenticated the request for
// the access log; h runs behind authenticate.
func noteActor(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if info, ok := r.Context().Value(requestKey{}).(*requestInfo); ok {
			info.actor = actor(r)
		}
		h.ServeHTTP(w, r)
	})
}

// instrument counts, times and logs the requests of one handler.
type instrument struct {
	logger   *slog.Logger
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

func newInstrument(logger *slog.Logger, reg prometheus.Registerer) *instrument {
	in := &instrument{
		logger: logger,
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: RequestsMetric, Help: "HTTP requests answered, by route pattern, method and status class (2xx, 4xx, ...).",
		}, []string{"route", "method", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: RequestDurationMetric, Help: "Time to answer an HTTP request, by route pattern and method.",
			Buckets: []float64{.001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"route", "method"}),
	}
	if reg != nil {
		reg.MustRegister(in.requests, in.duration)
	}
	return in
}

// wrap serves next with a request id in the context and the answer's header,
// then counts the request, times it and writes its access log line.
func (in *instrument) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		info := &requestInfo{id: requestIDOf(r)}
		w.Header().Set(RequestIDHeader, info.id)
		r = r.WithContext(context.WithValue(r.Context(), requestKey{}, info))
		rec := &recorder{ResponseWriter: w}
		next.ServeHTTP(rec, r)
		status := rec.statusCode()
		// The mux sets r.Pattern on the request it serves, the inner API mux too.
		route := routeOf(r.Pattern)
		elapsed := time.Since(start)
		method := methodLabel(r.Method)
		in.requests.WithLabelValues(route, method, statusClass(status)).Inc()
		in.duration.WithLabelValues(route, method).Observe(elapsed.Seconds())
		level := slog.LevelInfo
		if probeRoutes[route] {
			level = slog.LevelDebug
		}
		in.logger.Log(r.Context(), level, "http request", "method", r.Method, "route", route, "status", status,
			"bytes", rec.bytes, "duration", elapsed, "actor", info.actor, "remote_addr", r.RemoteAddr)
	})
}

// requestIDOf is the request's own id when it has a usable one, else a new one.
func requestIDOf(r *http.Request) string {
	if id := r.Header.Get(RequestIDHeader); id != "" && len(id) <= maxRequestIDLen && printable(id) {
		return id
	}
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func printable(s string) bool {
	for _, c := range s {
		if c <= ' ' || c > '~' {
			return false
		}
	}
	return true
}

// routeOf is the route label of a mux pattern: its path, without the method.
func routeOf(pattern string) string {
	if pattern == "" {
		return routeUnmatched
	}
	if _, path, ok := strings.Cut(pattern, " "); ok {
		return path
	}
	return pattern
}

// statusClass is a status code's class: "2xx", "4xx", ...
func statusClass(code int) string { return strconv.Itoa(code/100) + "xx" }

// recorder notes the status and the size of an answer. It flushes (the event
// streams need it) and unwraps for http.ResponseController.
type recorder struct {
	http.ResponseWriter
	status int
	bytes  int64
}

func (rec *recorder) WriteHeader(code int) {
	if rec.status == 0 {
		rec.status = code
	}
	rec.ResponseWriter.WriteHeader(code)
}

func (rec *recorder) Write(b []byte) (int, error) {
	if rec.status == 0 {
		rec.status = http.StatusOK
	}
	n, err := rec.ResponseWriter.Write(b)
	rec.bytes += int64(n)
	return n, err
}

// Flush sends what is buffered to the client.
func (rec *recorder) Flush() {
	if rec.status == 0 {
		rec.status = http.StatusOK
	}
	_ = http.NewResponseController(rec.ResponseWriter).Flush()
}

// Unwrap returns the wrapped writer.
func (rec *recorder) Unwrap() http.ResponseWriter { return rec.ResponseWriter }

func (rec *recorder) statusCode() int {
	if rec.status == 0 {
		return http.StatusOK
	}
	return rec.status
}

// LogHandler wraps h so that every record logged with the context of an HTTP
// request carries the request's id as http_request_id (request_id names a
// dispatch request), and every record logged within a traced span its trace_id.
func LogHandler(h slog.Handler) slog.Handler { return contextHandler{h} }

type contextHandler struct{ slog.Handler }

// Handle adds the request id of ctx, if any, to r.
func (c contextHandler) Handle(ctx context.Context, r slog.Record) error {
	id, span := RequestID(ctx), trace.SpanContextFromContext(ctx)
	if id != "" || span.HasTraceID() {
		r = r.Clone()
	}
	if id != "" {
		r.AddAttrs(slog.String("http_request_id", id))
	}
	if span.HasTraceID() {
		r.AddAttrs(slog.String("trace_id", span.TraceID().String()))
	}
	return c.Handler.Handle(ctx, r)
}

// WithAttrs keeps the request id on the derived handler.
func (c contextHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return contextHandler{c.Handler.WithAttrs(attrs)}
}

// WithGroup keeps the request id on the derived handler.
func (c contextHandler) WithGroup(name string) slog.Handler {
	return contextHandler{c.Handler.WithGroup(name)}
}
