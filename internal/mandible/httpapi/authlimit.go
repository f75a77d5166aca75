package httpapi

import (
	"math"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/mantis-deploy/mantis/internal/contract/api"
)

// Defaults of AuthLimit: ten failed credentials at once from one source, then one
// more every six seconds, tracked for at most 10,000 sources.
const (
	DefaultAuthFailureBurst = 10
	DefaultAuthFailureEvery = 6 * time.Second
	DefaultAuthSources      = 10_000
)

// AuthLimit bounds failed credential checks (an unknown bearer token, a refused
// sign-in) per source address; zero fields take the defaults.
type AuthLimit struct {
	// Burst is how many failures a source may have before it must wait.
	Burst int
	// Every is how often a source earns back one failure.
	Every time.Duration
	// Sources caps the sources tracked at once, bounding the limiter's memory.
	Sources int
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// AuthLimiter refuses credential checks, with 429 and Retry-After, from a source
// (a client IP; an IPv6 /64) that failed too many of them lately. It is checked
// before the credential is, so that a right guess made while refused is refused
// too; one AuthLimiter is shared by the API, the codec endpoint and the console.
type AuthLimiter struct {
	limit   AuthLimit
	mu      sync.Mutex
	sources map[netip.Prefix]*rate.Limiter
}

// NewAuthLimiter returns an AuthLimiter with limit's bounds.
func NewAuthLimiter(limit AuthLimit) *AuthLimiter {
	if limit.Burst <= 0 {
		limit.Burst = DefaultAuthFailureBurst
	}
	if limit.Every <= 0 {
		limit.Every = DefaultAuthFailureEvery
	}
	if limit.Sources <= 0 {
		limit.Sources = DefaultAuthSources
	}
	if limit.Now == nil {
		limit.Now = time.Now
	}
	return &AuthLimiter{limit: limit, sources: map[netip.Prefix]*rate.Limiter{}}
}

// Admit reports whether r's source may present a credential now; when it may not,
// it answers 429 with Retry-After itself.
func (l *AuthLimiter) Admit(w http.ResponseWriter, r *http.Request) bool {
	if !l.Held(w, r) {
		return true
	}
	api.WriteError(w, r, http.StatusTooManyRequests, api.CodeRateLimited,
		"too many failed credentials from this address; retry after "+w.Header().Get("Retry-After")+"s")
	return false
}

// Held reports whether r's source must wait before presenting a credential; when
// it must, it sets Retry-After (whole seconds) on w for the caller's 429.
func (l *AuthLimiter) Held(w http.ResponseWriter, r *http.Request) bool {
	wait := l.wait(r)
	if wait <= 0 {
		return false
	}
	w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(wait.Seconds()))))
	return true
}

// wait is how long r's source must wait before presenting a credential, or zero.
func (l *AuthLimiter) wait(r *http.Request) time.Duration {
	src, ok := sourceOf(r)
	if !ok {
		return 0
	}
	l.mu.Lock()
	lim, found := l.sources[src]
	l.mu.Unlock()
	if !found {
		return 0
	}
	tokens := lim.TokensAt(l.limit.Now())
	if tokens >= 1 {
		return 0
	}
	return time.Duration((1 - tokens) * float64(l.limit.Every))
}

// Fail records a failed credential from r's source.
func (l *AuthLimiter) Fail(r *http.Request) {
	src, ok := sourceOf(r)
	if !ok {
		return
	}
	now := l.limit.Now()
	l.mu.Lock()
	lim, found := l.sources[src]
	if !found {
		if len(l.sources) >= l.limit.Sources {
			l.evict(now)
		}
		lim = rate.NewLimiter(rate.Every(l.limit.Every), l.limit.Burst)
		l.sources[src] = lim
	}
	l.mu.Unlock()
	// Reserve, never cancelled: a failure always costs its token, into debt when the
	// budget is spent, so that guesses sent together while the source was still
	// admitted each lengthen its wait rather than pass for one.
	lim.ReserveN(now, 1)
}

// evict makes room for one source: it forgets every source whose budget is whole
// again (it holds nothing a new entry would not), and when none is, the one held the
// least (most tokens back), so that a source deep in debt is the last forgotten.
// Called with mu held.
func (l *AuthLimiter) evict(now time.Time) {
	var least netip.Prefix
	most := math.Inf(-1)
	for src, lim := range l.sources {
		tokens := lim.TokensAt(now)
		if tokens >= float64(l.limit.Burst) {
			delete(l.sources, src)
			continue
		}
		if tokens > most {
			least, most = src, tokens
		}
	}
	if len(l.sources) >= l.limit.Sources {
		delete(l.sources, least)
	}
}

// sourceOf is the source r came from: its peer's address (a forwarded-for header is
// anyone's to write), an IPv6 address widened to its /64, which one host holds whole.
func sourceOf(r *http.Request) (netip.Prefix, bool) {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	addr, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Prefix{}, false
	}
	addr = addr.Unmap()
	bits := 32
	if addr.Is6() {
		bits = 64
	}
	p, err := addr.WithZone("").Prefix(bits)
	return p, err == nil
}
