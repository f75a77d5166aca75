package daemon

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/config"
	"github.com/mantis-deploy/mantis/internal/metricsserver"
)

var errDone = errors.New("done")

// Without a listen address run runs alone, and register is never called.
func TestRunWithMetricsOff(t *testing.T) {
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	err := RunWithMetrics(context.Background(), config.Metrics{}, logger,
		func(*metricsserver.Server) { t.Error("register called without a metrics listener") },
		func(context.Context) error { return errDone })
	require.ErrorIs(t, err, errDone)
}

// With a listen address the listener serves, with what register set, while run
// runs; run's error ends both.
func TestRunWithMetricsOn(t *testing.T) {
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	var addr string
	err := RunWithMetrics(context.Background(), config.Metrics{Listen: "127.0.0.1:0"}, logger,
		func(m *metricsserver.Server) {
			addr = m.Addr().String()
			m.SetReadiness(func() error { return nil })
		},
		func(ctx context.Context) error {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+metricsserver.ReadyPath, nil)
			require.NoError(t, err)
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			require.NoError(t, resp.Body.Close())
			require.Equal(t, http.StatusOK, resp.StatusCode)
			return errDone
		})
	require.ErrorIs(t, err, errDone)
}
