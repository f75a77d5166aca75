package httpapi

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"html/template"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/mantis-deploy/mantis/internal/mandible/apitoken"
)

// sessionSigner issues and checks session cookies: "<payload>|<unix expiry>|<mac>",
// the payload base64url, the MAC an HMAC-SHA256 of the first two under key. A session
// payload names a token and its fingerprint (sessionPayload).
type sessionSigner struct {
	key []byte
	ttl time.Duration
	now func() time.Time
}

func (s sessionSigner) mac(payload string) string {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte(payload))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

func (s sessionSigner) issue(name string) (string, time.Time) {
	expires := s.now().Add(s.ttl)
	payload := base64.RawURLEncoding.EncodeToString([]byte(name)) + "|" + strconv.FormatInt(expires.Unix(), 10)
	return payload + "|" + s.mac(payload), expires
}

// signed reports whether value carries this signer's MAC, whether or not it expired.
func (s sessionSigner) signed(value string) bool {
	i := strings.LastIndexByte(value, '|')
	return len(s.key) > 0 && i >= 0 && hmac.Equal([]byte(value[i+1:]), []byte(s.mac(value[:i])))
}

func (s sessionSigner) verify(value string) (string, bool) {
	i := strings.LastIndexByte(value, '|')
	if len(s.key) == 0 || i < 0 {
		return "", false
	}
	payload, mac := value[:i], value[i+1:]
	if !hmac.Equal([]byte(mac), []byte(s.mac(payload))) {
		return "", false
	}
	enc, exp, ok := strings.Cut(payload, "|")
	unix, err := strconv.ParseInt(exp, 10, 64)
	if !ok || err != nil || !s.now().Before(time.Unix(unix, 0)) {
		return "", false
	}
	name, err := base64.RawURLEncoding.DecodeString(enc)
	if err != nil {
		return "", false
	}
	return string(name), true
}

// sessionPayload is what a session cookie of t carries: the token's name and the
// fingerprint of its secret, so that the session ends when the token is revoked or
// its secret replaced.
func sessionPayload(t apitoken.Token) string { return t.Name + "\x00" + fingerprint(t) }

// sessionToken returns the token a session cookie value names, looked up in keys
// again: a token removed from, or replaced in, the token file fails the lookup.
func sessionToken(s sessionSigner, keys *apitoken.Keyring, value string) (apitoken.Token, bool) {
	if len(value) > maxSessionCookie {
		return apitoken.Token{}, false
	}
	payload, ok := s.verify(value)
	if !ok {
		return apitoken.Token{}, false
	}
	name, print, _ := strings.Cut(payload, "\x00")
	t, ok := keys.ByName(name)
	if !ok || !hmac.Equal([]byte(print), []byte(fingerprint(t))) {
		return apitoken.Token{}, false
	}
	return t, true
}

var signInPage = template.Must(template.New("signin").Parse(`<!doctype html>
<html><head><meta charset="utf-8"><title>Mantis sign-in</title></head>
<body>
<h1>Mantis</h1>
{{if .Name}}<p>Signed in as token <b>{{.Name}}</b>. The Temporal Web UI can now decode payloads.</p>{{end}}
{{if .Problem}}<p role="alert">{{.Problem}}</p>{{end}}
<form method="post" action="/signin">
<label>API token <input type="password" name="token" autocomplete="off" required></label>
<button type="submit">Sign in</button>
</form>
</body></html>
`))

type signInView struct{ Name, Problem string }

// signInHandler serves the sign-in page: GET shows the form, POST takes an API token and
// answers with a session cookie (HttpOnly, SameSite, Secure over TLS). Every answer
// carries the console's page headers (no framing, a strict CSP); a POST is taken only
// from this server's own page (SameOrigin), and not from an address that failed too
// many sign-ins lately.
func signInHandler(opts CodecOptions, sessions sessionSigner) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		SetPageSecurityHeaders(w.Header())
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		switch r.Method {
		case http.MethodGet:
			_ = signInPage.Execute(w, signInView{})
		case http.MethodPost:
			signIn(w, r, opts, sessions)
		default:
			w.Header().Set("Allow", "GET, POST")
			w.WriteHeader(http.StatusMethodNotAllowed)
		}
	}
}

// signIn takes the sign-in form's token and sets the session cookie.
func signIn(w http.ResponseWriter, r *http.Request, opts CodecOptions, sessions sessionSigner) {
	if !SameOrigin(r) {
		opts.Logger.WarnContext(r.Context(), "sign-in refused", "reason", "origin", "origin", r.Header.Get("Origin"))
		w.WriteHeader(http.StatusForbidden)
		_ = signInPage.Execute(w, signInView{Problem: "sign in from this server's own sign-in page"})
		return
	}
	if opts.AuthLimiter.Held(w, r) {
		opts.Logger.WarnContext(r.Context(), "sign-in refused", "reason", refusedRateLimited, "remote_addr", r.RemoteAddr)
		w.WriteHeader(http.StatusTooManyRequests)
		_ = signInPage.Execute(w, signInView{Problem: "too many failed sign-ins from this address; try again in " + w.Header().Get("Retry-After") + " s"})
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 8<<10)
	var t apitoken.Token
	ok := false
	if opts.Keys != nil && r.ParseForm() == nil {
		t, ok = opts.Keys.Lookup(r.PostFormValue("token"))
	}
	if !ok {
		opts.AuthLimiter.Fail(r)
		opts.Logger.WarnContext(r.Context(), "sign-in refused", "reason", "unknown token", "remote_addr", r.RemoteAddr)
		w.WriteHeader(http.StatusUnauthorized)
		_ = signInPage.Execute(w, signInView{Problem: "unknown token"})
		return
	}
	value, expires := sessions.issue(sessionPayload(t))
	secure := opts.Secure || r.TLS != nil
	cookie := &http.Cookie{Name: SessionCookie, Value: value, Path: "/", Expires: expires,
		HttpOnly: true, Secure: secure, SameSite: http.SameSiteLaxMode}
	if secure {
		cookie.SameSite = http.SameSiteNoneMode // the UI may live on another site; CORS guards the origin
	}
	http.SetCookie(w, cookie)
	opts.Logger.InfoContext(r.Context(), "signed in", "token", t.Name)
	_ = signInPage.Execute(w, signInView{Name: t.Name})
}

// PageContentSecurityPolicy lets a page load only its own server's script, style and
// data, post forms only there, and be framed by nobody.
const PageContentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"

// SetPageSecurityHeaders sets the headers every HTML page Mandible serves carries
// (the console's and the codec's sign-in page): the CSP, no framing, no sniffing,
// and no Referer to other origins.
func SetPageSecurityHeaders(h http.Header) {
	h.Set("Content-Security-Policy", PageContentSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("X-Frame-Options", "DENY")
}
