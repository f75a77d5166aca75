package httpapi_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/converter"

	"github.com/mantis-deploy/mantis/internal/mandible/apitoken"
	"github.com/mantis-deploy/mantis/internal/mandible/httpapi"
)

const sessionSecret = "mantis_session-test-secret"

// sessionRig is an API whose event streams are a handler that names the caller, and
// a console session of a deploy token.
type sessionRig struct {
	keys     *apitoken.Keyring
	sessions *httpapi.Sessions
	server   *httptest.Server
	cookie   *http.Cookie
	csrf     string
}

func setupSessions(t *testing.T) sessionRig {
	t.Helper()
	keys := apitoken.NewKeyring([]apitoken.Token{{Name: "ops", Scope: apitoken.ScopeDeploy, SHA256: apitoken.Hash(sessionSecret)}})
	sessions := httpapi.NewSessions([]byte("0123456789abcdef0123456789abcdef"), keys, 0)
	h := httpapi.New(httpapi.Options{Keyring: keys, Sessions: sessions, Events: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok, _ := httpapi.TokenFrom(r.Context())
		_, _ = w.Write([]byte("caller " + tok.Name))
	})})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)

	rec := httptest.NewRecorder()
	tok, _ := keys.Lookup(sessionSecret)
	csrf := sessions.Issue(rec, httptest.NewRequest(http.MethodPost, "/ui/signin", nil), tok)
	cookies := rec.Result().Cookies()
	require.Len(t, cookies, 1)
	return sessionRig{keys: keys, sessions: sessions, server: srv, cookie: cookies[0], csrf: csrf}
}

func (s sessionRig) call(t *testing.T, method string, cookie *http.Cookie, header map[string]string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, s.server.URL+"/sse/events", nil)
	require.NoError(t, err)
	if cookie != nil {
		req.AddCookie(cookie)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var b strings.Builder
	buf := make([]byte, 4096)
	n, _ := resp.Body.Read(buf)
	b.Write(buf[:n])
	return resp.StatusCode, b.String()
}

func TestConsoleSessionCookieIsStrictAndHttpOnly(t *testing.T) {
	t.Parallel()
	s := setupSessions(t)
	require.Equal(t, httpapi.ConsoleCookie, s.cookie.Name)
	require.True(t, s.cookie.HttpOnly)
	require.Equal(t, http.SameSiteStrictMode, s.cookie.SameSite)
	require.Equal(t, "/", s.cookie.Path)
}

func TestConsoleSessionAuthenticatesReads(t *testing.T) {
	t.Parallel()
	s := setupSessions(t)
	code, body := s.call(t, http.MethodGet, s.cookie, nil)
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "caller ops", body, "the session stands for its token")

	code, _ = s.call(t, http.MethodGet, nil, nil)
	require.Equal(t, http.StatusUnauthorized, code)
	forged := *s.cookie
	forged.Value = strings.Replace(forged.Value, "|", "x|", 1)
	code, _ = s.call(t, http.MethodGet, &forged, nil)
	require.Equal(t, http.StatusUnauthorized, code, "a cookie whose MAC does not match is no session")
	codecCookie := &http.Cookie{Name: httpapi.SessionCookie, Value: s.cookie.Value}
	code, _ = s.call(t, http.MethodGet, codecCookie, nil)
	require.Equal(t, http.StatusUnauthorized, code, "the codec's cookie (SameSite None or Lax) opens no API route")
}

func TestConsoleSessionWritesNeedCSRFTokenAndOrigin(t *testing.T) {
	t.Parallel()
	s := setupSessions(t)
	self := s.server.URL
	for _, tc := range []struct {
		name   string
		header map[string]string
		want   int
		says   string
	}{
		{"no csrf token", map[string]string{"Origin": self}, http.StatusForbidden, "CSRF"},
		{"wrong csrf token", map[string]string{"Origin": self, httpapi.CSRFHeader: "x" + s.csrf}, http.StatusForbidden, "CSRF"},
		{"another origin", map[string]string{"Origin": "https://evil.example", httpapi.CSRFHeader: s.csrf}, http.StatusForbidden, "Origin"},
		{"no origin or referer", map[string]string{httpapi.CSRFHeader: s.csrf}, http.StatusForbidden, "Origin"},
		{"token and origin", map[string]string{"Origin": self, httpapi.CSRFHeader: s.csrf}, http.StatusOK, "caller ops"},
		{"token and referer", map[string]string{"Referer": self + "/ui/", httpapi.CSRFHeader: s.csrf}, http.StatusOK, "caller ops"},
	} {
		code, body := s.call(t, http.MethodPost, s.cookie, tc.header)
		require.Equal(t, tc.want, code, tc.name)
		require.Contains(t, body, tc.says, tc.name)
	}
}

func TestConsoleSessionEndsWithItsToken(t *testing.T) {
	t.Parallel()
	s := setupSessions(t)
	s.keys.Replace([]apitoken.Token{{Name: "ops", Scope: apitoken.ScopeDeploy, SHA256: apitoken.Hash("rotated-secret")}})
	code, _ := s.call(t, http.MethodGet, s.cookie, nil)
	require.Equal(t, http.StatusUnauthorized, code, "a session of a replaced token is no longer accepted")
	s.keys.Replace(nil)
	code, _ = s.call(t, http.MethodGet, s.cookie, nil)
	require.Equal(t, http.StatusUnauthorized, code, "nor of a removed one")
}

func TestCodecEndpointAcceptsConsoleSession(t *testing.T) {
	t.Parallel()
	s := setupSessions(t)
	endpoint := httptest.NewServer(httpapi.NewCodecEndpoint(httpapi.CodecOptions{
		Codec: converter.NewZlibCodec(converter.ZlibCodecOptions{}), Console: s.sessions}))
	t.Cleanup(endpoint.Close)
	for _, tc := range []struct {
		cookie *http.Cookie
		want   int
	}{{nil, http.StatusUnauthorized}, {s.cookie, http.StatusOK}} {
		req, err := http.NewRequest(http.MethodPost, endpoint.URL+httpapi.CodecPrefix+"/decode", strings.NewReader(`{"payloads":[]}`))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		if tc.cookie != nil {
			req.AddCookie(tc.cookie)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, tc.want, resp.StatusCode)
	}
}
