package thorax

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/metricsserver"
)

// readyz is the status and body of the /readyz answer of the listener at addr.
func readyz(t *testing.T, addr string) (int, string) {
	t.Helper()
	resp, err := http.Get("http://" + addr + metricsserver.ReadyPath)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

// From the moment a drain starts until the process exits, Thorax answers
// not-ready (ErrDraining, 503 on /readyz), so a load balancer or Kubernetes
// sends it nothing more while it waits for the commands its agents still run.
func TestReadinessAnswersDrainingDuringADrain(t *testing.T) {
	t.Parallel()
	f := setup(t)
	agent := &fakeAgent{block: make(chan struct{})}
	agentAddr := f.startAgent(t, agent)
	f.mandible.queue(listenCommand("cmd-held-through-drain", agentAddr, 1))
	th := f.start(t)
	receive(t, agent.calls)

	metrics, err := metricsserver.Listen("127.0.0.1:0", slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	metrics.SetReadiness(th.Readiness)
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- metrics.Run(ctx) }()
	t.Cleanup(func() { cancel(); require.NoError(t, <-served) })
	addr := metrics.Addr().String()
	status, body := readyz(t, addr)
	require.Equal(t, http.StatusOK, status, body)

	th.stop() // the drain waits for the command the agent holds
	require.Eventually(t, func() bool { return errors.Is(th.Readiness(), ErrDraining) }, waitFor, 10*time.Millisecond)
	status, body = readyz(t, addr)
	require.Equal(t, http.StatusServiceUnavailable, status)
	require.Equal(t, "not ready: "+ErrDraining.Error()+"\n", body)
	select {
	case err := <-th.done:
		t.Fatalf("the drain ended while an agent still ran a command: %v", err)
	default:
	}

	close(agent.block)
	require.NoError(t, th.wait(t))
	require.ErrorIs(t, th.Readiness(), ErrDraining, "a drained instance stays not-ready")

	families, err := th.Registry().Gather()
	require.NoError(t, err)
	problems, err := promlint.NewWithMetricFamilies(families).Lint()
	require.NoError(t, err)
	require.Empty(t, problems, "Thorax's metric families, drain ones included, pass promlint")
}
