package httpapi

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"go.temporal.io/sdk/converter"

	"github.com/mantis-deploy/mantis/internal/contract/api"
	"github.com/mantis-deploy/mantis/internal/mandible/apitoken"
)

// Paths of the codec endpoint (the Temporal remote codec protocol under CodecPrefix) and
// of its sign-in page.
const (
	CodecPrefix = "/codec"
	SignInPath  = "/signin"
	// SessionCookie is the cookie the sign-in page sets and the codec endpoint accepts.
	SessionCookie = "mantis_session"
	// DefaultSessionTTL is how long a session cookie is good for.
	DefaultSessionTTL = 12 * time.Hour
	// DefaultCodecMaxBody bounds a codec request's body when CodecOptions leave it
	// zero: Temporal refuses a payload past 2 MiB by default, and a call carries a
	// few of them, base64 inside JSON.
	DefaultCodecMaxBody = 8 << 20
	// codecInFlight bounds the codec requests a replica reads and decodes at once, so
	// that their bodies together stay under codecInFlight × MaxBodyBytes (64 MiB by
	// default) however many connections send them; more wait for a turn.
	codecInFlight = 8
)

// CodecOptions configure the codec endpoint.
type CodecOptions struct {
	// Codec decodes (and encodes) payloads for the Temporal Web UI and CLI.
	Codec converter.PayloadCodec
	// Keys are the API tokens admitted, as a bearer token or through the sign-in
	// page; a session is looked up in Keys again on every call, so a token revoked
	// from the token file (SIGHUP) ends its sessions at once.
	Keys *apitoken.Keyring
	// UIURL is the Temporal Web UI; its origin is the only one CORS admits.
	UIURL string
	// SessionKey signs session cookies; replicas that share it accept each other's.
	SessionKey []byte
	// SessionTTL bounds a session (DefaultSessionTTL when zero).
	SessionTTL time.Duration
	// Secure marks the cookie Secure (and SameSite=None, for a UI on another site);
	// a sign-in that arrives over TLS gets such a cookie anyway.
	Secure bool
	Logger *slog.Logger
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// Console, when set, admits the console's session cookie too.
	Console *Sessions
	// AuthLimiter refuses credentials from an address that failed too many lately;
	// share the API's (a limiter of its own when nil).
	AuthLimiter *AuthLimiter
	// MaxBodyBytes bounds a codec request's body (DefaultCodecMaxBody when zero):
	// the SDK's handler reads a body whole, so nothing past it is read at all.
	MaxBodyBytes int64
}

// NewCodecEndpoint serves POST /codec/encode and /codec/decode to a caller holding an API
// token (bearer) or a session cookie from GET/POST /signin, with CORS for the UI's origin
// only.
func NewCodecEndpoint(opts CodecOptions) http.Handler {
	if opts.SessionTTL <= 0 {
		opts.SessionTTL = DefaultSessionTTL
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.AuthLimiter == nil {
		opts.AuthLimiter = NewAuthLimiter(AuthLimit{})
	}
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = DefaultCodecMaxBody
	}
	sessions := sessionSigner{key: opts.SessionKey, ttl: opts.SessionTTL, now: opts.Now}
	origin := originOf(opts.UIURL)
	codec := http.StripPrefix(CodecPrefix, converter.NewPayloadCodecHTTPHandler(opts.Codec))

	turns := make(chan struct{}, codecInFlight)
	mux := http.NewServeMux()
	mux.Handle(SignInPath, signInHandler(opts, sessions))
	mux.HandleFunc(CodecPrefix+"/", func(w http.ResponseWriter, r *http.Request) {
		if !corsAllowed(w, r, origin) {
			opts.Logger.WarnContext(r.Context(), "codec request refused", "reason", "origin", "origin", r.Header.Get("Origin"))
			api.WriteError(w, r, http.StatusForbidden, api.CodeForbidden, "origin not allowed")
			return
		}
		if r.Method == http.MethodOptions {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		if r.Method != http.MethodPost {
			api.WriteError(w, r, http.StatusMethodNotAllowed, api.CodeMethodNotAllowed, "the codec endpoint takes POST")
			return
		}
		if !opts.AuthLimiter.Admit(w, r) {
			opts.Logger.WarnContext(r.Context(), "codec request refused", "reason", refusedRateLimited, "remote_addr", r.RemoteAddr)
			return
		}
		t, ok := codecCaller(r, opts.Keys, sessions)
		if console, _, found := opts.Console.tokenOf(r); !ok && found {
			t, ok = console, true
		}
		if !ok {
			if guessed(r, sessions) {
				opts.AuthLimiter.Fail(r)
			}
			opts.Logger.WarnContext(r.Context(), "codec request refused", "reason", "unauthenticated")
			api.WriteError(w, r, http.StatusUnauthorized, api.CodeUnauthenticated, "a bearer token or a session from "+SignInPath+" is required")
			return
		}
		opts.Logger.DebugContext(r.Context(), "codec request", "path", r.URL.Path, "token", t.Name)
		select {
		case turns <- struct{}{}:
			defer func() { <-turns }()
		case <-r.Context().Done():
			return // the caller left while waiting
		}
		if !bufferBody(w, r, opts.MaxBodyBytes) {
			opts.Logger.WarnContext(r.Context(), "codec request refused", "reason", "body_too_large", "token", t.Name, "limit", opts.MaxBodyBytes)
			return
		}
		codec.ServeHTTP(w, r)
	})
	return mux
}

// bufferBody reads r's body, at most limit bytes, and gives it back to r to read again,
// so that a handler that reads a body whole (the SDK's codec handler does) holds no
// more than limit. A longer body is refused 413, having read limit+1 bytes of it.
func bufferBody(w http.ResponseWriter, r *http.Request, limit int64) bool {
	if r.ContentLength > limit {
		writeTooLarge(w, r, limit)
		return false
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		writeTooLarge(w, r, limit)
		return false
	case err != nil:
		api.WriteError(w, r, http.StatusBadRequest, api.CodeInvalidBody, "reading the request body: "+err.Error())
		return false
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	return true
}

// writeTooLarge answers 413 naming the limit and the key that sets it.
func writeTooLarge(w http.ResponseWriter, r *http.Request, limit int64) {
	// The connection is closed after the answer: the rest of the body is never read.
	w.Header().Set("Connection", "close")
	api.WriteError(w, r, http.StatusRequestEntityTooLarge, api.CodeTooLarge,
		fmt.Sprintf("codec request body exceeds %d bytes (http.max_codec_body_bytes)", limit))
}

// codecCaller returns who calls: the bearer token, or the token the session cookie
// names, each as keys hold it now.
func codecCaller(r *http.Request, keys *apitoken.Keyring, sessions sessionSigner) (apitoken.Token, bool) {
	if keys == nil {
		return apitoken.Token{}, false
	}
	if secret, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		return keys.Lookup(secret)
	}
	if c, err := r.Cookie(SessionCookie); err == nil {
		return sessionToken(sessions, keys, c.Value)
	}
	return apitoken.Token{}, false
}

// guessed reports whether r's refused credential counts as a guess for the limiter: a
// bearer token, or a session cookie Mandible did not sign. A cookie it signed that has
// expired, or whose token was revoked, is a person's stale tab (the Web UI goes on
// decoding with it), not a guess, and a bare call is none either: counting those would
// hold back every caller behind the same address.
func guessed(r *http.Request, sessions sessionSigner) bool {
	if r.Header.Get("Authorization") != "" {
		return true
	}
	c, err := r.Cookie(SessionCookie)
	return err == nil && !sessions.signed(c.Value)
}

// corsAllowed sets the CORS headers for origin and reports whether the request may go
// on: one without an Origin header is not a browser's cross-origin call.
func corsAllowed(w http.ResponseWriter, r *http.Request, origin string) bool {
	got := r.Header.Get("Origin")
	if got == "" {
		return r.Method != http.MethodOptions
	}
	if origin == "" || got != origin {
		return false
	}
	h := w.Header()
	h.Set("Access-Control-Allow-Origin", origin)
	h.Set("Access-Control-Allow-Credentials", "true")
	h.Set("Access-Control-Allow-Methods", "POST, OPTIONS")
	h.Set("Access-Control-Allow-Headers", "Content-Type, X-Namespace, Authorization")
	h.Set("Access-Control-Max-Age", "600")
	h.Add("Vary", "Origin")
	return true
}

// originOf returns scheme://host of a URL, or "" for none.
func originOf(raw string) string {
	u, err := url.Parse(raw)
	if raw == "" || err != nil || u.Host == "" {
		return ""
	}
	return u.Scheme + "://" + u.Host
}
