package httpapi_test

import (
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/mandible/apitoken"
	"github.com/mantis-deploy/mantis/internal/mandible/httpapi"
	"github.com/mantis-deploy/mantis/internal/testrig/testenv"
)

// failedCredentials is how many failed credentials an address may present before
// it is held back (httpapi.DefaultAuthFailureBurst), and retryAfter what it is told
// then: one more every six seconds.
const (
	failedCredentials = 10
	retryAfter        = "6"
)

// clientFrom is an HTTP client whose connections come from the loopback address ip.
func clientFrom(ip string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	return &http.Client{Transport: &http.Transport{DialContext: d.DialContext}}
}

// signInFrom posts token to the sign-in page at base from client, from the page's
// own origin, and returns the status, the Retry-After and whether a cookie was set.
func signInFrom(t *testing.T, client *http.Client, base, token string) (int, string, bool) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, base+httpapi.SignInPath, strings.NewReader(url.Values{"token": {token}}.Encode()))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", base)
	resp, err := client.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("Retry-After"), len(resp.Cookies()) > 0
}

// bearerCall makes a call to u with token as its bearer (none when empty) and
// returns the status and the Retry-After.
func bearerCall(t *testing.T, method, u, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, u, strings.NewReader(`{"payloads":[]}`))
	require.NoError(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("Retry-After")
}

// After ten failed sign-ins an address is answered 429 with Retry-After, even for
// the right token (a guess made while held back learns nothing); another address is
// not held back.
func TestFailedSignInsAreRateLimitedPerAddress(t *testing.T) {
	t.Parallel()
	s := setupCodec(t)
	guesser, neighbour := clientFrom("127.0.0.1"), clientFrom("127.0.0.2")
	for i := range failedCredentials {
		code, _, _ := signInFrom(t, guesser, s.srv.URL, "guess-"+strconv.Itoa(i))
		require.Equal(t, http.StatusUnauthorized, code, "guess %d", i)
	}
	code, retry, cookie := signInFrom(t, guesser, s.srv.URL, "one-guess-too-many")
	require.Equal(t, http.StatusTooManyRequests, code)
	require.Equal(t, retryAfter, retry)
	require.False(t, cookie)
	code, _, cookie = signInFrom(t, guesser, s.srv.URL, codecToken)
	require.Equal(t, http.StatusTooManyRequests, code, "the right token is held back too")
	require.False(t, cookie)

	code, _, cookie = signInFrom(t, neighbour, s.srv.URL, codecToken)
	require.Equal(t, http.StatusOK, code, "another address is not held back")
	require.True(t, cookie)
}

// Unknown bearer tokens count against their address, on the API and on the codec
// endpoint: past the budget the answer is 429 with Retry-After whatever the token;
// a call without a token is no guess and stays 401.
func TestUnknownBearerTokensAreRateLimitedPerAddress(t *testing.T) {
	t.Parallel()
	const good = "limit-good-0123456789abcdef"
	keys := apitoken.NewKeyring([]apitoken.Token{{Name: "ci", Scope: apitoken.ScopeRead, SHA256: apitoken.Hash(good)}})
	api := httptest.NewServer(httpapi.New(httpapi.Options{DB: testenv.MigratedPool(t), Keyring: keys}))
	t.Cleanup(api.Close)
	s := setupCodec(t)

	for _, at := range []struct{ method, url, good string }{
		{http.MethodGet, api.URL + "/api/v1/targets", good},
		{http.MethodPost, s.srv.URL + "/codec/decode", codecToken},
	} {
		for i := range failedCredentials {
			code, _ := bearerCall(t, at.method, at.url, "wrong-token-"+strconv.Itoa(i))
			require.Equal(t, http.StatusUnauthorized, code, "guess %d at %s", i, at.url)
		}
		code, retry := bearerCall(t, at.method, at.url, at.good)
		require.Equal(t, http.StatusTooManyRequests, code, at.url)
		require.Equal(t, retryAfter, retry, at.url)
	}
	code, _ := bearerCall(t, http.MethodGet, api.URL+"/api/v1/targets", "")
	require.Equal(t, http.StatusUnauthorized, code, "no token is no guess")
}

// A session cookie Mandible signed that has since expired is a person's stale Web UI
// tab, which goes on decoding with it: refused, but never counted as a guess, so that
// it does not hold back every caller behind the same address. A forged cookie counts.
func TestExpiredSessionCookiesAreNotCountedAsGuesses(t *testing.T) {
	t.Parallel()
	var now atomic.Int64
	now.Store(time.Now().UnixNano())
	clock := func() time.Time { return time.Unix(0, now.Load()) }
	c := newTestCodec(t)
	srv := httptest.NewServer(httpapi.NewCodecEndpoint(httpapi.CodecOptions{
		Codec: c, Keys: apitoken.NewKeyring(codecTokens()), UIURL: uiOrigin + "/namespaces/default",
		SessionKey: c.DeriveKey("session"), SessionTTL: time.Minute, Now: clock,
	}))
	t.Cleanup(srv.Close)
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	client := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	_, _, got := signInFrom(t, client, srv.URL, codecToken)
	require.True(t, got, "signed in")
	now.Add(int64(2 * time.Minute)) // the session has expired

	call := func(cookie string) int {
		req, err := http.NewRequest(http.MethodPost, srv.URL+"/codec/decode", strings.NewReader(`{"payloads":[]}`))
		require.NoError(t, err)
		if cookie == "" {
			for _, ck := range jar.Cookies(req.URL) {
				req.AddCookie(ck)
			}
		} else {
			req.AddCookie(&http.Cookie{Name: httpapi.SessionCookie, Value: cookie})
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	for i := range 3 * failedCredentials {
		require.Equal(t, http.StatusUnauthorized, call(""), "stale tab, call %d", i)
	}
	for i := range failedCredentials {
		require.Equal(t, http.StatusUnauthorized, call("forged|"+strconv.Itoa(i)), "forged cookie %d", i)
	}
	require.Equal(t, http.StatusTooManyRequests, call("forged|again"), "forged cookies are guesses")
}
