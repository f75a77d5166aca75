package console_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/mandible/apitoken"
	"github.com/mantis-deploy/mantis/internal/mandible/console"
	"github.com/mantis-deploy/mantis/internal/mandible/httpapi"
)

const secret = "mantis_console-test-secret"

type rig struct {
	server   *httptest.Server
	sessions *httpapi.Sessions
	client   *http.Client
}

func setup(t *testing.T) rig {
	t.Helper()
	keys := apitoken.NewKeyring([]apitoken.Token{{Name: "ops", Scope: apitoken.ScopeAdmin, SHA256: apitoken.Hash(secret)}})
	sessions := httpapi.NewSessions([]byte("0123456789abcdef0123456789abcdef"), keys, 0)
	srv := httptest.NewServer(console.New(console.Options{Sessions: sessions, Keys: keys}))
	t.Cleanup(srv.Close)
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	return rig{server: srv, sessions: sessions, client: noFollow}
}

// do sends a request; form, when set, is posted from the console's own origin unless
// origin says otherwise.
func (r rig) do(t *testing.T, method, path string, form url.Values, origin string, cookies ...*http.Cookie) (*http.Response, string) {
	t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, r.server.URL+path, body)
	require.NoError(t, err)
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	for _, c := range cookies {
		req.AddCookie(c)
	}
	resp, err := r.client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, string(b)
}

// signIn signs in with the right token and returns the session cookie.
func (r rig) signIn(t *testing.T) *http.Cookie {
	t.Helper()
	resp, _ := r.do(t, http.MethodPost, console.SignInPath, url.Values{"token": {secret}, "next": {"/ui/queue"}}, r.server.URL)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.Equal(t, "/ui/queue", resp.Header.Get("Location"))
	cookies := resp.Cookies()
	require.Len(t, cookies, 1)
	require.Equal(t, httpapi.ConsoleCookie, cookies[0].Name)
	require.Equal(t, http.SameSiteStrictMode, cookies[0].SameSite)
	require.True(t, cookies[0].HttpOnly)
	return cookies[0]
}

func TestPagesNeedASession(t *testing.T) {
	t.Parallel()
	r := setup(t)
	for _, path := range []string{"/ui/", "/ui/queue", "/ui/dlq", "/ui/targets", "/ui/deployments/new"} {
		resp, _ := r.do(t, http.MethodGet, path, nil, "")
		require.Equal(t, http.StatusSeeOther, resp.StatusCode, path)
		require.Equal(t, console.SignInPath+"?next="+url.QueryEscape(path), resp.Header.Get("Location"), path)
	}
}

func TestSignInRefusesUnknownTokensAndOtherOrigins(t *testing.T) {
	t.Parallel()
	r := setup(t)
	resp, body := r.do(t, http.MethodPost, console.SignInPath, url.Values{"token": {"wrong"}}, r.server.URL)
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	require.Contains(t, body, "unknown API token")
	require.Empty(t, resp.Cookies())

	resp, body = r.do(t, http.MethodPost, console.SignInPath, url.Values{"token": {secret}}, "https://evil.example")
	require.Equal(t, http.StatusForbidden, resp.StatusCode, "a sign-in form posted from another site is refused")
	require.Contains(t, body, "own sign-in page")
	require.Empty(t, resp.Cookies())

	resp, body = r.do(t, http.MethodPost, console.SignInPath, url.Values{"token": {strings.Repeat("x", 9<<10)}}, r.server.URL)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	require.Contains(t, body, "at most 8 KiB")
}

func TestSignInGoesOnlyToConsolePages(t *testing.T) {
	t.Parallel()
	r := setup(t)
	for next, want := range map[string]string{
		"/ui/deployments/new":         "/ui/deployments/new",
		"https://evil.example/ui/":    "/ui/",
		"//evil.example/ui/":          "/ui/",
		"/api/v1/dlq":                 "/ui/",
		"/ui/\\evil":                  "/ui/",
		"/ui/?name=web&status=failed": "/ui/?name=web&status=failed",
	} {
		resp, _ := r.do(t, http.MethodPost, console.SignInPath, url.Values{"token": {secret}, "next": {next}}, r.server.URL)
		require.Equal(t, want, resp.Header.Get("Location"), next)
	}
}

var csrfMeta = regexp.MustCompile(`<meta name="csrf-token" content="([^"]+)">`)

func TestPageCarriesSessionCSRFTokenAndPolicy(t *testing.T) {
	t.Parallel()
	r := setup(t)
	cookie := r.signIn(t)
	resp, body := r.do(t, http.MethodGet, "/ui/deployments/0193a0b4-7a51-7c2e-9a8e-3b7b0f0d1e21", nil, "", cookie)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, resp.Header.Get("Content-Security-Policy"), "script-src 'self'")
	require.Equal(t, "DENY", resp.Header.Get("X-Frame-Options"))
	require.Contains(t, body, `data-id="0193a0b4-7a51-7c2e-9a8e-3b7b0f0d1e21"`)
	m := csrfMeta.FindStringSubmatch(body)
	require.Len(t, m, 2)
	req := httptest.NewRequest(http.MethodGet, "/", nil)
	req.AddCookie(cookie)
	_, csrf, ok := r.sessions.Token(req)
	require.True(t, ok)
	require.Equal(t, csrf, m[1], "the page's CSRF token is its session's")

	resp, _ = r.do(t, http.MethodGet, "/ui/deployments/not-a-uuid", nil, "", cookie)
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
}

func TestSignOutNeedsCSRFToken(t *testing.T) {
	t.Parallel()
	r := setup(t)
	cookie := r.signIn(t)
	_, page := r.do(t, http.MethodGet, "/ui/", nil, "", cookie)
	csrf := csrfMeta.FindStringSubmatch(page)[1]

	resp, _ := r.do(t, http.MethodPost, console.SignOutPath, url.Values{}, r.server.URL, cookie)
	require.Equal(t, http.StatusForbidden, resp.StatusCode, "a sign-out without the CSRF token is refused")
	resp, _ = r.do(t, http.MethodPost, console.SignOutPath, url.Values{httpapi.CSRFField: {csrf}}, r.server.URL, cookie)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.Len(t, resp.Cookies(), 1)
	require.Equal(t, -1, resp.Cookies()[0].MaxAge, "the session cookie is removed")
}

func TestStaticFilesAreEmbedded(t *testing.T) {
	t.Parallel()
	r := setup(t)
	resp, body := r.do(t, http.MethodGet, "/ui/static/console.js", nil, "")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, resp.Header.Get("Content-Type"), "javascript")
	require.Contains(t, body, "mantis-grid-rendered")
	resp, _ = r.do(t, http.MethodGet, "/ui/static/console.css", nil, "")
	require.Equal(t, http.StatusOK, resp.StatusCode)
}
