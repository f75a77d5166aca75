package metricsserver_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/metricsserver"
)

// The listener serves the profile index and a CPU profile, nothing else, and stops
// with its context.
func TestListenerServesProfilesAndStops(t *testing.T) {
	s, err := metricsserver.ListenProfiling("127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx, slog.New(slog.DiscardHandler)) }()
	base := "http://" + s.Addr()

	get := func(path string) (int, []byte) {
		resp, err := http.Get(base + path)
		require.NoError(t, err)
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, body
	}
	code, body := get(metricsserver.ProfilingPath)
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, string(body), "goroutine")
	code, body = get(metricsserver.ProfilingPath + "profile?seconds=1")
	require.Equal(t, http.StatusOK, code)
	require.NotEmpty(t, body, "a CPU profile")
	code, _ = get("/metrics")
	require.Equal(t, http.StatusNotFound, code, "only profiles are served here")

	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("the listener did not stop with its context")
	}
}
