package httpapi_test

import (
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/broker"
	"github.com/mantis-deploy/mantis/internal/config"
	"github.com/mantis-deploy/mantis/internal/devcerts"
	"github.com/mantis-deploy/mantis/internal/mandible/httpapi"
)

// silentBroker accepts connections and never answers them, as a broker behind a
// black hole does: a dial to it hangs until its own timeout. It counts the dials;
// stop closes it, and every connection it holds.
func silentBroker(t *testing.T) (port int, dials *atomic.Int64, stop func()) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	dials = new(atomic.Int64)
	var (
		mu    sync.Mutex
		conns []net.Conn
	)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			dials.Add(1)
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	stop = func() {
		l.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	}
	t.Cleanup(stop)
	return l.Addr().(*net.TCPAddr).Port, dials, stop
}

// readyz is the status and body of a /readyz answer, 0 on a transport error.
func readyz(client *http.Client, url string) (int, string) {
	resp, err := client.Get(url + "/readyz")
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// A flood of unauthenticated /readyz probes while the broker hangs (a dial held for
// its 10 s timeout under the publisher's lock) is answered within the readiness
// bound, 503 naming the broker, and costs the broker one dial, not one per probe.
func TestReadyzFloodAnswersWithinItsBoundWhileTheBrokerHangs(t *testing.T) {
	t.Parallel()
	port, dials, stopBroker := silentBroker(t)
	certs, err := devcerts.Generate(t.TempDir(), []string{"localhost", "127.0.0.1"})
	require.NoError(t, err)
	b := broker.NewClient(config.Queue{Enabled: true, Host: "127.0.0.1", Port: port, Username: "mantis",
		Password: "not-used-here", VHost: "/mantis", CACertPath: certs.CACert()}, "readyz flood", slog.New(slog.DiscardHandler))
	srv := httptest.NewServer(httpapi.New(httpapi.Options{Checks: map[string]httpapi.Check{"broker": b.Ping}}))
	t.Cleanup(srv.Close)
	t.Cleanup(stopBroker) // first: a handler waiting on the broker ends before srv.Close waits for it

	const callers = 100
	client := &http.Client{Timeout: 15 * time.Second}
	type answer struct {
		code int
		body string
		took time.Duration
	}
	answers := make(chan answer, callers)
	for range callers {
		go func() {
			start := time.Now()
			code, body := readyz(client, srv.URL)
			answers <- answer{code: code, body: body, took: time.Since(start)}
		}()
	}
	for range callers {
		a := <-answers
		require.Equal(t, http.StatusServiceUnavailable, a.code, a.body)
		require.Contains(t, a.body, "broker")
		require.Less(t, a.took, 5*time.Second, "a /readyz answer took %s", a.took)
	}
	require.EqualValues(t, 1, dials.Load(), "the flood dialled the broker more than once")

	// The next round finds the check still hanging and does not call it again.
	require.Eventually(t, func() bool {
		code, body := readyz(client, srv.URL)
		return code == http.StatusServiceUnavailable && strings.Contains(body, "no answer yet to the check started")
	}, 5*time.Second, 50*time.Millisecond)
	require.EqualValues(t, 1, dials.Load(), "a hanging check was called again")
}
