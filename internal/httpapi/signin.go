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
)

// sessionSigner issues and checks session cookies: "<token name>|<unix expiry>|<mac>",
// each part base64url, the MAC an HMAC-SHA256 of the first two under key.
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
// answers with a session cookie (HttpOnly, SameSite, Secure over TLS).
func signInHandler(opts CodecOptions, sessions sessionSigner) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		switch r.Method {
		case http.MethodGet:
			_ = signInPage.Execute(w, signInView{})
		case http.MethodPost:
			r.Body = http.MaxBytesReader(w, r.Body, 8<<10)
			name, ok := "", false
			if opts.Authenticate != nil && r.ParseForm() == nil {
				name, ok = opts.Authenticate(r.PostFormValue("token"))
			}
			if !ok {
				opts.Logger.WarnContext(r.Context(), "sign-in refused")
				w.WriteHeader(http.StatusUnauthorized)
				_ = signInPage.Execute(w, signInView{Problem: "unknown token"})
				return
			}
			value, expires := sessions.issue(name)
			secure := opts.Secure || r.TLS != nil
			cookie := &http.Cookie{Name: SessionCookie, Value: value, Path: "/", Expires: expires,
				HttpOnly: true, Secure: secure, SameSite: http.SameSiteLaxMode}
			if secure {
				cookie.SameSite = http.SameSiteNoneMode // the UI may live on another site; CORS guards the origin
			}
			http.SetCookie(w, cookie)
			opts.Logger.InfoContext(r.Context(), "signed in", "token", name)
			_ = signInPage.Execute(w, signInView{Name: name})
		default:
			w.Header().Set("Allow", "GET, POST")
			w.WriteHeader(http.StatusMethodNotAllowed)
		}
	}
}
