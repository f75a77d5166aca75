package metricsserver_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/metricsserver"
)

// get fetches path from s and returns the status and body.
func get(t *testing.T, s *metricsserver.Server, path string) (int, string) {
	t.Helper()
	resp, err := http.Get("http://" + s.Addr().String() + path)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(body)
}

func TestServesGoAndProcessMetricsAndHealth(t *testing.T) {
	t.Parallel()
	s, err := metricsserver.Listen("127.0.0.1:0", slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()

	code, body := get(t, s, metricsserver.MetricsPath)
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, "go_goroutines ")
	require.Contains(t, body, "process_open_fds ")
	require.Contains(t, body, "process_resident_memory_bytes ")
	code, body = get(t, s, metricsserver.HealthPath)
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "ok\n", body)

	cancel()
	require.NoError(t, <-done)
	_, err = http.Get("http://" + s.Addr().String() + metricsserver.HealthPath)
	require.Error(t, err, "the listener is closed once its context ends")
}

func TestListenRefusesABusyAddress(t *testing.T) {
	t.Parallel()
	s, err := metricsserver.Listen("127.0.0.1:0", slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	_, err = metricsserver.Listen(s.Addr().String(), slog.New(slog.DiscardHandler))
	require.ErrorContains(t, err, "listening for metrics on")
}

func TestReadyAnswersWhatTheReadinessCheckSays(t *testing.T) {
	t.Parallel()
	s, err := metricsserver.Listen("127.0.0.1:0", slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() { _ = s.Run(ctx) }()

	code, body := get(t, s, metricsserver.ReadyPath)
	require.Equal(t, http.StatusServiceUnavailable, code, "not ready before the process says how to tell")
	require.Equal(t, "not ready: starting\n", body)

	var ready atomic.Bool
	s.SetReadiness(func() error {
		if !ready.Load() {
			return errors.New("not registered with mandible")
		}
		return nil
	})
	code, body = get(t, s, metricsserver.ReadyPath)
	require.Equal(t, http.StatusServiceUnavailable, code)
	require.Equal(t, "not ready: not registered with mandible\n", body)
	ready.Store(true)
	code, body = get(t, s, metricsserver.ReadyPath)
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "ok\n", body)
}
