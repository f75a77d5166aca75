package console_test

import (
	"net/http"
	"net/url"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/mandible/console"
)

// After ten failed sign-ins from one address the console answers 429 with
// Retry-After, and the right token is held back too.
func TestFailedSignInsAreRateLimited(t *testing.T) {
	t.Parallel()
	r := setup(t)
	for i := range 10 { // the limiter's default burst
		resp, _ := r.do(t, http.MethodPost, console.SignInPath, url.Values{"token": {"wrong-" + strconv.Itoa(i)}}, r.server.URL)
		require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "guess %d", i)
	}
	resp, body := r.do(t, http.MethodPost, console.SignInPath, url.Values{"token": {secret}}, r.server.URL)
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	require.NotEmpty(t, resp.Header.Get("Retry-After"))
	require.Contains(t, body, "too many failed sign-ins")
	require.Empty(t, resp.Cookies())
}
