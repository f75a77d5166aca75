package httpapi

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/mantis-deploy/mantis/internal/contract/api"
	"github.com/mantis-deploy/mantis/internal/mandible/apitoken"
)

// The console's session contract: the cookie the console's sign-in sets, and where a
// page sends the session's CSRF token on a state-changing call.
const (
	// ConsoleCookie is the console's session cookie: HttpOnly and SameSite=Strict, so
	// that no request started by another site carries it. The API routes, the event
	// streams and the codec endpoint accept it. The codec's own SessionCookie is not
	// accepted by the API: it may be SameSite=None for a Temporal UI on another site.
	ConsoleCookie = "mantis_console"
	// CSRFHeader carries the session's CSRF token on a fetch from a console page.
	CSRFHeader = "X-CSRF-Token"
	// CSRFField carries the session's CSRF token in a console form.
	CSRFField = "csrf_token"
	// maxSessionCookie bounds the cookie read: a name, an expiry and two MACs.
	maxSessionCookie = 1024
)

// Errors of a state-changing call made with a console session.
var (
	ErrCSRFToken = errors.New("the session's CSRF token is missing or wrong (send it in " + CSRFHeader + ")")
	ErrOrigin    = errors.New("the request's Origin is not this server's")
)

// Sessions issues and checks console sessions. A session names its API token and the
// token's fingerprint; every request looks the token up again, so a token removed
// or replaced in the token file ends its sessions.
type Sessions struct {
	signer sessionSigner
	keys   *apitoken.Keyring
}

// NewSessions returns sessions signed with key (replicas that share it accept each
// other's) that last ttl (DefaultSessionTTL when zero), for tokens of keys.
func NewSessions(key []byte, keys *apitoken.Keyring, ttl time.Duration) *Sessions {
	if ttl <= 0 {
		ttl = DefaultSessionTTL
	}
	return &Sessions{signer: sessionSigner{key: key, ttl: ttl, now: time.Now}, keys: keys}
}

// fingerprint names a token's secret without revealing it.
func fingerprint(t apitoken.Token) string { return hex.EncodeToString(t.SHA256[:8]) }

// Issue sets a session cookie for t on w and returns the session's CSRF token.
func (s *Sessions) Issue(w http.ResponseWriter, r *http.Request, t apitoken.Token) string {
	value, expires := s.signer.issue(t.Name + "\x00" + fingerprint(t))
	http.SetCookie(w, &http.Cookie{Name: ConsoleCookie, Value: value, Path: "/", Expires: expires,
		HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode})
	return s.csrf(value)
}

// Clear removes the session cookie.
func (s *Sessions) Clear(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{Name: ConsoleCookie, Value: "", Path: "/", MaxAge: -1,
		HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode})
}

// Token returns the token of r's session, and the session's CSRF token.
func (s *Sessions) Token(r *http.Request) (apitoken.Token, string, bool) {
	c, err := r.Cookie(ConsoleCookie)
	if err != nil || len(c.Value) > maxSessionCookie {
		return apitoken.Token{}, "", false
	}
	payload, ok := s.signer.verify(c.Value)
	if !ok {
		return apitoken.Token{}, "", false
	}
	name, print, _ := strings.Cut(payload, "\x00")
	t, ok := s.keys.ByName(name)
	if !ok || !hmac.Equal([]byte(print), []byte(fingerprint(t))) {
		return apitoken.Token{}, "", false
	}
	return t, s.csrf(c.Value), true
}

// csrf is the CSRF token of the session whose cookie is value.
func (s *Sessions) csrf(value string) string {
	m := hmac.New(sha256.New, s.signer.key)
	m.Write([]byte("csrf\x00" + value))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// maxFormBody bounds a form CheckWrite reads for its CSRF field.
const maxFormBody = 64 << 10

// CheckWrite checks a state-changing request made with a session: its Origin (or,
// without one, its Referer) must be this server, and it must carry the session's CSRF
// token in CSRFHeader or, for a form, CSRFField.
func CheckWrite(r *http.Request, csrf string) error {
	if !SameOrigin(r) {
		return ErrOrigin
	}
	got := r.Header.Get(CSRFHeader)
	if got == "" && strings.HasPrefix(r.Header.Get("Content-Type"), "application/x-www-form-urlencoded") {
		// A form is read whole to find the field (up to 10 MB, net/http's own cap),
		// before any handler's bound applies: the console's forms are small.
		r.Body = http.MaxBytesReader(nil, r.Body, maxFormBody)
		got = r.PostFormValue(CSRFField)
	}
	if got == "" || !hmac.Equal([]byte(got), []byte(csrf)) {
		return ErrCSRFToken
	}
	return nil
}

// SameOrigin reports whether r's Origin, or its Referer when it has none, is the host
// r was sent to.
func SameOrigin(r *http.Request) bool {
	from := r.Header.Get("Origin")
	if from == "" || from == "null" {
		from = r.Header.Get("Referer")
	}
	u, err := url.Parse(from)
	if from == "" || err != nil {
		return false
	}
	return u.Host == r.Host && (u.Scheme == "https" || (u.Scheme == "http" && r.TLS == nil))
}

// safeMethod reports whether m changes nothing, so needs no CSRF check.
func safeMethod(m string) bool {
	return m == http.MethodGet || m == http.MethodHead || m == http.MethodOptions
}

// sessionCall serves r with h when it carries a console session, and reports whether
// it answered: a state-changing call without the session's CSRF token or from
// another origin is refused 403.
func (g *gate) sessionCall(w http.ResponseWriter, r *http.Request, h http.Handler) bool {
	if g.sessions == nil {
		return false
	}
	t, csrf, ok := g.sessions.Token(r)
	if !ok {
		return false
	}
	if !safeMethod(r.Method) {
		if err := CheckWrite(r, csrf); err != nil {
			g.refusals.WithLabelValues(refusedForbidden).Inc()
			g.logger.WarnContext(r.Context(), "api call refused", "reason", "csrf", "method", r.Method,
				"path", r.URL.Path, "actor", t.Name, "err", err)
			api.WriteError(w, r, http.StatusForbidden, api.CodeForbidden, err.Error())
			return true
		}
	}
	h.ServeHTTP(w, r.WithContext(WithToken(r.Context(), t)))
	return true
}

// tokenOf is Token for sessions that may be nil (none configured).
func (s *Sessions) tokenOf(r *http.Request) (apitoken.Token, string, bool) {
	if s == nil {
		return apitoken.Token{}, "", false
	}
	return s.Token(r)
}
