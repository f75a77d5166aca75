package httpapi_test

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/mandible/apitoken"
	"github.com/mantis-deploy/mantis/internal/mandible/httpapi"
	"github.com/mantis-deploy/mantis/internal/testrig/testenv"
)

// fakeClock is a clock the test moves.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// One AuthLimiter shared by the API and the codec endpoint counts an address's
// failures at both (switching between them gains a guesser nothing), and the
// address may try again once Retry-After has passed.
func TestOneAuthLimiterServesTheAPIAndTheCodecAndRefills(t *testing.T) {
	t.Parallel()
	require.Equal(t, failedCredentials, httpapi.DefaultAuthFailureBurst)
	clock := &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	limiter := httpapi.NewAuthLimiter(httpapi.AuthLimit{Now: clock.Now})
	const good = "limit-good-0123456789abcdef"
	keys := apitoken.NewKeyring([]apitoken.Token{{Name: "ci", Scope: apitoken.ScopeRead, SHA256: apitoken.Hash(good)}})
	api := httptest.NewServer(httpapi.New(httpapi.Options{DB: testenv.MigratedPool(t), Keyring: keys, AuthLimiter: limiter}))
	t.Cleanup(api.Close)
	c := newTestCodec(t)
	codecSrv := httptest.NewServer(httpapi.NewCodecEndpoint(httpapi.CodecOptions{Codec: c, Keys: keys, SessionKey: c.DeriveKey("s"), AuthLimiter: limiter}))
	t.Cleanup(codecSrv.Close)

	targets, decode := api.URL+"/api/v1/targets", codecSrv.URL+"/codec/decode"
	for i := range failedCredentials {
		method, u := http.MethodGet, targets
		if i%2 == 1 {
			method, u = http.MethodPost, decode
		}
		code, _ := bearerCall(t, method, u, "wrong-token-"+strconv.Itoa(i))
		require.Equal(t, http.StatusUnauthorized, code, "guess %d at %s", i, u)
	}
	code, _ := bearerCall(t, http.MethodGet, targets, good)
	require.Equal(t, http.StatusTooManyRequests, code)
	code, _ = bearerCall(t, http.MethodPost, decode, good)
	require.Equal(t, http.StatusTooManyRequests, code)
	code, _, _ = signInFrom(t, http.DefaultClient, codecSrv.URL, good)
	require.Equal(t, http.StatusTooManyRequests, code, "the sign-in page shares the budget")

	clock.advance(6 * time.Second)
	code, _ = bearerCall(t, http.MethodGet, targets, good)
	require.Equal(t, http.StatusOK, code)
}

// The limiter tracks at most Sources addresses: past that it forgets one to make
// room, so a flood of addresses cannot grow it without bound. An IPv6 address
// counts by its /64.
func TestAuthLimiterMemoryIsBounded(t *testing.T) {
	t.Parallel()
	clock := &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	l := httpapi.NewAuthLimiter(httpapi.AuthLimit{Burst: 1, Sources: 1, Now: clock.Now})
	from := func(addr string) *http.Request {
		r := httptest.NewRequest(http.MethodPost, "/signin", nil)
		r.RemoteAddr = addr
		return r
	}
	l.Fail(from("192.0.2.1:1000"))
	require.True(t, l.Held(httptest.NewRecorder(), from("192.0.2.1:2000")), "one address, its budget spent")
	require.False(t, l.Held(httptest.NewRecorder(), from("[2001:db8::1]:1")))
	l.Fail(from("[2001:db8::1]:1"))
	require.True(t, l.Held(httptest.NewRecorder(), from("[2001:db8::ffff]:1")), "an IPv6 address counts by its /64")
	require.False(t, l.Held(httptest.NewRecorder(), from("192.0.2.1:2000")), "the first address was forgotten to make room")
}

// Failures sent together while the source was still admitted each cost a token, into
// debt: the wait grows with them, rather than ten guesses passing for one. When the
// table is full, the source held the least is forgotten, not one deep in debt.
func TestAuthLimiterChargesEveryFailureAndForgetsTheLeastHeld(t *testing.T) {
	t.Parallel()
	clock := &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	l := httpapi.NewAuthLimiter(httpapi.AuthLimit{Burst: 1, Every: time.Minute, Sources: 2, Now: clock.Now})
	from := func(addr string) *http.Request {
		r := httptest.NewRequest(http.MethodPost, "/signin", nil)
		r.RemoteAddr = addr
		return r
	}
	for range 10 { // ten guesses in flight at once, all admitted before the first failed
		l.Fail(from("192.0.2.1:1000"))
	}
	w := httptest.NewRecorder()
	require.True(t, l.Held(w, from("192.0.2.1:1000")))
	require.Equal(t, "600", w.Header().Get("Retry-After"), "ten failures, ten minutes")

	l.Fail(from("192.0.2.2:1000")) // one minute of debt
	l.Fail(from("192.0.2.3:1000")) // the table is full: one of the two must go
	require.True(t, l.Held(httptest.NewRecorder(), from("192.0.2.1:1")), "the source deep in debt is kept")
	require.False(t, l.Held(httptest.NewRecorder(), from("192.0.2.2:1")), "the source held the least was forgotten")
}
