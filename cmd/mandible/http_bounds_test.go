package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/mandible/apitoken"
	"github.com/mantis-deploy/mantis/internal/testrig/devstack"
	"github.com/mantis-deploy/mantis/internal/testrig/testenv"
)

// Two read tokens of the bounded replica: each is one caller of the event streams.
const (
	streamSecretA = "stream-caller-a-0123456789abcdef"
	streamSecretB = "stream-caller-b-0123456789abcdef"
)

// startBounded runs a replica with short HTTP timeouts and small stream caps, and
// returns its address once it answers.
func startBounded(t *testing.T) (*child, string) {
	t.Helper()
	bin := testenv.Binary(t, "mandible")
	port, err := devstack.FreePort(false)
	require.NoError(t, err)
	temporal := testenv.TemporalServer(t)
	tokenFile := filepath.Join(t.TempDir(), "tokens.toml")
	require.NoError(t, os.WriteFile(tokenFile, []byte(apitoken.FileLine("caller-a", apitoken.ScopeRead, streamSecretA)+
		apitoken.FileLine("caller-b", apitoken.ScopeRead, streamSecretB)), 0o600))
	config := writeConfig(t, fmt.Sprintf(`
replica_id = "bounds-test"

[database]
url = %q
max_conns = 4

[temporal]
address = %q
namespace = %q
deployment_task_queue = %q

[http]
listen = "127.0.0.1:%d"
token_file = %q
read_header_timeout = "1s"
read_timeout = "2s"
write_timeout = "2s"
idle_timeout = "1s"

[sse]
max_streams = 3
max_streams_per_caller = 2

[grpc]
listen = "127.0.0.1:0"
insecure = true
`, testenv.DatabaseURL(t), temporal.Address, temporal.Namespace, temporal.TaskQueue, port, tokenFile))
	mandible := start(t, bin, "--config", config)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	mandible.eventually(t, "/healthz answering 200", func() bool {
		code, _ := get("http://" + addr + "/healthz")
		return code == http.StatusOK
	})
	return mandible, addr
}

// closedWithin reports whether the server closes conn within d, reading (and
// dropping) what it sends until then.
func closedWithin(conn net.Conn, d time.Duration) error {
	if err := conn.SetReadDeadline(time.Now().Add(d)); err != nil {
		return err
	}
	_, err := io.Copy(io.Discard, conn)
	if err == nil || errors.Is(err, net.ErrClosed) {
		return nil // EOF: closed by the server
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return fmt.Errorf("still open after %s", d)
	}
	return nil // reset by the server
}

// stream is an open event stream: ended closes when it does, status is its answer.
type stream struct {
	status int
	detail string
	ended  chan struct{}
	cancel context.CancelFunc
}

// openStream opens /sse/events with secret and, when it is served, reads it in the
// background until it ends.
func openStream(t *testing.T, addr, secret string) *stream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/sse/events", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+secret)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	s := &stream{status: resp.StatusCode, ended: make(chan struct{}), cancel: cancel}
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		s.detail = string(body)
		close(s.ended)
		return s
	}
	lines := bufio.NewScanner(resp.Body)
	for lines.Scan() && lines.Text() != ": live" {
	}
	go func() {
		defer close(s.ended)
		defer resp.Body.Close()
		for lines.Scan() {
		}
	}()
	return s
}

func (s *stream) isEnded() bool {
	select {
	case <-s.ended:
		return true
	default:
		return false
	}
}

// A replica's HTTP server closes what holds a connection without using it (headers
// that never end, a body that never ends, a kept-alive connection left idle) within
// its timeouts, while event streams outlive them; and it refuses an event stream
// past a caller's cap or past the replica's with 429 naming the key.
func TestHTTPServerTimeoutsAndStreamCaps(t *testing.T) {
	t.Parallel()
	_, addr := startBounded(t)

	t.Run("headers that never end", func(t *testing.T) {
		conn, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		defer conn.Close()
		_, err = io.WriteString(conn, "GET /healthz HTTP/1.1\r\nHost: mandible\r\n")
		require.NoError(t, err)
		require.NoError(t, closedWithin(conn, 5*time.Second))
	})

	t.Run("a body that never ends", func(t *testing.T) {
		conn, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		defer conn.Close()
		_, err = io.WriteString(conn, "POST /api/v1/targets HTTP/1.1\r\nHost: mandible\r\nAuthorization: Bearer "+streamSecretA+
			"\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"name\":")
		require.NoError(t, err)
		require.NoError(t, closedWithin(conn, 6*time.Second))
	})

	t.Run("a kept-alive connection left idle", func(t *testing.T) {
		conn, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		defer conn.Close()
		_, err = io.WriteString(conn, "GET /healthz HTTP/1.1\r\nHost: mandible\r\n\r\n")
		require.NoError(t, err)
		br := bufio.NewReader(conn)
		resp, err := http.ReadResponse(br, nil)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.NoError(t, closedWithin(conn, 5*time.Second))
	})

	a1 := openStream(t, addr, streamSecretA)
	require.Equal(t, http.StatusOK, a1.status, a1.detail)
	t.Run("an event stream outlives the read and write timeouts", func(t *testing.T) {
		require.Never(t, a1.isEnded, 5*time.Second, 50*time.Millisecond, "the stream ended within 5 s (read_timeout 2s)")
	})

	t.Run("streams past a caller's cap and the replica's", func(t *testing.T) {
		a2 := openStream(t, addr, streamSecretA)
		require.Equal(t, http.StatusOK, a2.status, a2.detail)
		a3 := openStream(t, addr, streamSecretA)
		require.Equal(t, http.StatusTooManyRequests, a3.status, a3.detail)
		require.Contains(t, a3.detail, "sse.max_streams_per_caller")
		require.Contains(t, a3.detail, "caller-a")

		b1 := openStream(t, addr, streamSecretB)
		require.Equal(t, http.StatusOK, b1.status, b1.detail)
		b2 := openStream(t, addr, streamSecretB)
		require.Equal(t, http.StatusTooManyRequests, b2.status, b2.detail)
		require.Contains(t, b2.detail, "sse.max_streams)")

		_, metrics := get("http://" + addr + "/metrics")
		require.Contains(t, string(metrics), `mantis_http_refusals_total{reason="too_many_streams"} 2`)

		a2.cancel()
		require.Eventually(t, func() bool {
			b := openStream(t, addr, streamSecretB)
			b.cancel()
			return b.status == http.StatusOK
		}, 10*time.Second, 50*time.Millisecond, "a stream closed makes room for another")
	})
}
