package main

import (
	"context"
	"log/slog"
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/config"
	"github.com/mantis-deploy/mantis/internal/testrig/testenv"
)

// backendNames lists the application_name of every session on the pool's database.
func backendNames(t *testing.T, cfg config.Database, appName string) []string {
	t.Helper()
	ctx := context.Background()
	pool, err := openDatabase(ctx, cfg, appName, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	defer pool.Close()
	rows, err := pool.Query(ctx, `SELECT application_name FROM pg_stat_activity WHERE datname = current_database() AND pid <> 0`)
	require.NoError(t, err)
	var names []string
	for rows.Next() {
		var n string
		require.NoError(t, rows.Scan(&n))
		names = append(names, n)
	}
	require.NoError(t, rows.Err())
	return names
}

func TestReplicaConnectionsCarryItsApplicationName(t *testing.T) {
	t.Parallel()
	cfg := config.Database{URL: testenv.DatabaseURL(t), MaxConns: 2}
	require.Contains(t, backendNames(t, cfg, config.Mandible{ReplicaID: "replica-7"}.ApplicationName()), "mandible replica-7",
		"pg_stat_activity tells the replicas apart")
}

func TestApplicationNameInTheURLWins(t *testing.T) {
	t.Parallel()
	u, err := url.Parse(testenv.DatabaseURL(t))
	require.NoError(t, err)
	q := u.Query()
	q.Set("application_name", "ops-chosen")
	u.RawQuery = q.Encode()
	names := backendNames(t, config.Database{URL: u.String(), MaxConns: 2}, config.Mandible{ReplicaID: "replica-7"}.ApplicationName())
	require.Contains(t, names, "ops-chosen")
	require.NotContains(t, names, "mandible replica-7")
}
