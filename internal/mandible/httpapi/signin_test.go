package httpapi_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/mandible/httpapi"
)

// postSignIn posts token to the codec's sign-in page at base, sent from origin as a
// browser would (no Origin header when origin is empty).
func postSignIn(base, origin, token string) (*http.Response, error) {
	req, err := http.NewRequest(http.MethodPost, base+httpapi.SignInPath, strings.NewReader(url.Values{"token": {token}}.Encode()))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	return http.DefaultClient.Do(req)
}

// requirePageHeaders checks the headers every HTML page of Mandible carries.
func requirePageHeaders(t *testing.T, h http.Header) {
	t.Helper()
	require.Contains(t, h.Get("Content-Security-Policy"), "frame-ancestors 'none'")
	require.Contains(t, h.Get("Content-Security-Policy"), "default-src 'none'")
	require.Equal(t, "DENY", h.Get("X-Frame-Options"))
	require.Equal(t, "nosniff", h.Get("X-Content-Type-Options"))
	require.Equal(t, "same-origin", h.Get("Referrer-Policy"))
}

// The codec's sign-in form is taken only when posted from its own page: another
// site (or a post naming no origin at all) cannot sign a browser in under a token
// of its choosing. Every answer of the page forbids framing and sets a strict CSP.
func TestCodecSignInRefusesOtherOriginsAndSendsPageHeaders(t *testing.T) {
	t.Parallel()
	s := setupCodec(t)

	page, err := http.Get(s.srv.URL + httpapi.SignInPath)
	require.NoError(t, err)
	page.Body.Close()
	require.Equal(t, http.StatusOK, page.StatusCode)
	requirePageHeaders(t, page.Header)

	for _, origin := range []string{"https://evil.example", uiOrigin, ""} {
		resp, err := postSignIn(s.srv.URL, origin, codecToken)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusForbidden, resp.StatusCode, "origin %q", origin)
		require.Empty(t, resp.Cookies(), "origin %q", origin)
		requirePageHeaders(t, resp.Header)
	}

	resp, err := postSignIn(s.srv.URL, s.srv.URL, codecToken)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.NotEmpty(t, resp.Cookies())
	requirePageHeaders(t, resp.Header)
}
