package httpapi

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mantis-deploy/mantis/internal/contract/api"
	"github.com/mantis-deploy/mantis/internal/mandible/apitoken"
)

type tokenKey struct{}

// TokenFrom returns the token that authenticated the request, as Authenticate
// stored it in the request's context.
func TokenFrom(ctx context.Context) (apitoken.Token, bool) {
	t, ok := ctx.Value(tokenKey{}).(apitoken.Token)
	return t, ok
}

// WithToken returns ctx carrying t, as Authenticate does (for callers that
// authenticate otherwise, a session cookie say).
func WithToken(ctx context.Context, t apitoken.Token) context.Context {
	return context.WithValue(ctx, tokenKey{}, t)
}

// actor is the name of the token that made the request, recorded on what it writes.
func actor(r *http.Request) string {
	t, _ := TokenFrom(r.Context())
	return t.Name
}

// Refusal reasons, the reason label of mantis_http_refusals_total.
const (
	refusedUnauthenticated = "unauthenticated"
	refusedForbidden       = "forbidden"
	refusedRateLimited     = "rate_limited"
	refusedTooManyStreams  = "too_many_streams"
)

// gate authenticates API calls and checks their scope, logging and counting every
// refusal.
type gate struct {
	keys     *apitoken.Keyring
	logger   *slog.Logger
	refusals *prometheus.CounterVec
	// sessions, when set, admits the console's session cookie too (sessionCall).
	sessions *Sessions
	// limiter refuses a bearer token from an address that presented too many
	// unknown ones lately.
	limiter *AuthLimiter
}

func newGate(keys *apitoken.Keyring, logger *slog.Logger, reg prometheus.Registerer) *gate {
	g := &gate{keys: keys, logger: logger, limiter: NewAuthLimiter(AuthLimit{}), refusals: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "mantis_http_refusals_total",
		Help: "HTTP API calls refused: unauthenticated (no or unknown token), forbidden (scope too narrow), " +
			"rate_limited (too many unknown tokens from the address) or too_many_streams (an event stream past a cap).",
	}, []string{"reason"})}
	if reg != nil {
		reg.MustRegister(g.refusals)
	}
	return g
}

// Authenticate wraps h so that it answers 401 unless the request carries a bearer
// token the keyring holds; h finds the token with TokenFrom.
func Authenticate(keys *apitoken.Keyring, h http.Handler) http.Handler {
	return newGate(keys, slog.New(slog.DiscardHandler), nil).authenticate(h)
}

func (g *gate) authenticate(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		secret, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if ok {
			if g.limiter.Held(w, r) {
				g.refuseRateLimited(w, r)
				return
			}
			if t, found := g.keys.Lookup(secret); found {
				h.ServeHTTP(w, r.WithContext(WithToken(r.Context(), t)))
				return
			}
			g.limiter.Fail(r)
		} else if g.sessionCall(w, r, h) {
			return
		}
		g.refusals.WithLabelValues(refusedUnauthenticated).Inc()
		g.logger.WarnContext(r.Context(), "api call refused", "reason", refusedUnauthenticated,
			"method", r.Method, "path", r.URL.Path, "remote_addr", r.RemoteAddr, "bearer_present", ok)
		w.Header().Set("WWW-Authenticate", `Bearer realm="mantis"`)
		api.WriteError(w, r, http.StatusUnauthorized, api.CodeUnauthenticated, "missing or unknown bearer token")
	})
}

// refuseRateLimited answers 429 to a bearer token from an address the limiter
// holds back (Retry-After is set), logging and counting it.
func (g *gate) refuseRateLimited(w http.ResponseWriter, r *http.Request) {
	g.refusals.WithLabelValues(refusedRateLimited).Inc()
	g.logger.WarnContext(r.Context(), "api call refused", "reason", refusedRateLimited,
		"method", r.Method, "path", r.URL.Path, "remote_addr", r.RemoteAddr)
	api.WriteError(w, r, http.StatusTooManyRequests, api.CodeRateLimited,
		"too many unknown tokens from this address; retry after "+w.Header().Get("Retry-After")+"s")
}

// needs wraps h so that it answers 403, naming the scope needed and the one held,
// unless the authenticated token's scope covers need.
func (g *gate) needs(need apitoken.Scope, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t, ok := TokenFrom(r.Context())
		if !ok || !t.Scope.Covers(need) {
			g.refusals.WithLabelValues(refusedForbidden).Inc()
			g.logger.WarnContext(r.Context(), "api call refused", "reason", refusedForbidden,
				"method", r.Method, "path", r.URL.Path, "actor", t.Name, "scope_held", t.Scope, "scope_needed", need)
			api.WriteError(w, r, http.StatusForbidden, api.CodeForbidden,
				fmt.Sprintf("%s %s needs scope %s; token %q holds scope %s", r.Method, r.URL.Path, need, t.Name, t.Scope))
			return
		}
		h.ServeHTTP(w, r)
	})
}
