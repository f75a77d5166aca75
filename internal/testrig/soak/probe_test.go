package soak_test

import (
	"context"
	"log/slog"
	"net/http"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/config"
	"github.com/mantis-deploy/mantis/internal/metricsserver"
	"github.com/mantis-deploy/mantis/internal/testrig/soak"
	"github.com/mantis-deploy/mantis/internal/testrig/testenv"
)

func TestProbesReadThisProcess(t *testing.T) {
	t.Parallel()
	rss, err := soak.ReadRSS(os.Getpid())
	require.NoError(t, err)
	require.Greater(t, rss, int64(1<<20), "a Go test binary holds more than a MiB")

	// Other tests of the package run alongside and open and close files too, so
	// the count is checked on many files at once, with room for their churn.
	const opened = 32
	before, err := soak.CountFDs(os.Getpid())
	require.NoError(t, err)
	for range opened {
		f, err := os.Open(os.Args[0])
		require.NoError(t, err)
		defer f.Close()
	}
	after, err := soak.CountFDs(os.Getpid())
	require.NoError(t, err)
	require.GreaterOrEqual(t, after, before+opened/2, "open files are counted")

	_, err = soak.ReadRSS(0x7ffffff0)
	require.ErrorContains(t, err, "reading the status of pid")
}

func TestScrapeGoroutinesReadsAMetricsListener(t *testing.T) {
	t.Parallel()
	s, err := metricsserver.Listen("127.0.0.1:0", slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = s.Run(ctx) }()
	url := "http://" + s.Addr().String() + metricsserver.MetricsPath

	n, err := soak.ScrapeGoroutines(ctx, http.DefaultClient, url)
	require.NoError(t, err)
	require.Positive(t, n)
	_, err = soak.ScrapeGoroutines(ctx, http.DefaultClient, "http://"+s.Addr().String()+"/nowhere")
	require.ErrorContains(t, err, "404")
}

func TestDBConnectionsCountSessionsByApplicationName(t *testing.T) {
	t.Parallel()
	pool := testenv.MigratedPool(t)
	ctx := context.Background()
	name := config.Mandible{ReplicaID: "soak-probe"}.ApplicationName()
	conn, err := pool.Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	_, err = conn.Exec(ctx, "SET application_name = '"+name+"'")
	require.NoError(t, err)
	other, err := pool.Acquire(ctx)
	require.NoError(t, err)
	defer other.Release()

	counts, err := soak.DBConnections(ctx, other)
	require.NoError(t, err)
	require.Equal(t, 1, counts[name])
}
