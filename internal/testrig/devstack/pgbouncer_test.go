package devstack_test

import (
	"context"
	"log/slog"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/testrig/devstack"
	"github.com/mantis-deploy/mantis/internal/testrig/testenv"
)

// PgBouncer in transaction mode serves the test's database under the same user and
// password, names itself in application_name, and keeps no session between
// transactions: a named prepared statement made in one is gone in the next.
func TestPgBouncerPoolsTransactions(t *testing.T) {
	ctx := context.Background()
	pgb, err := devstack.StartPgBouncer(ctx, slog.New(slog.DiscardHandler),
		devstack.PgBouncerOptions{Backend: testenv.DatabaseURL(t), PoolSize: 1})
	require.NoError(t, err)
	t.Cleanup(pgb.Stop)

	cfg, err := pgx.ParseConfig(pgb.URL())
	require.NoError(t, err, pgb.Log())
	cfg.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol
	cfg.RuntimeParams["application_name"] = "pooled-client"
	conns := make([]*pgx.Conn, 3)
	for i := range conns {
		conns[i], err = pgx.ConnectConfig(ctx, cfg)
		require.NoError(t, err, pgb.Log())
		t.Cleanup(func() { conns[i].Close(ctx) })
	}
	var name string
	require.NoError(t, conns[0].QueryRow(ctx, "SELECT current_setting('application_name')").Scan(&name))
	require.Regexp(t, `^pooled-client - 127\.0\.0\.1:\d+$`, name, "the server connection names the pooler's client")

	// Three clients over one server connection: a session statement one client makes
	// is met by the others.
	_, err = conns[0].Exec(ctx, "PREPARE pooled_probe AS SELECT 1")
	require.NoError(t, err)
	for _, c := range conns[1:] {
		var n int
		require.NoError(t, c.QueryRow(ctx, "SELECT count(*) FROM pg_prepared_statements WHERE name = 'pooled_probe'").Scan(&n))
		require.Equal(t, 1, n, "a prepared statement stays with the server connection, not with its client")
	}
}
