package devstack

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

// requireTemporalServerEnv is testenv.RequireTemporalServerEnv (testenv imports this
// package): set to 1, the run must exercise a production temporal-server.
const requireTemporalServerEnv = "MANTIS_REQUIRE_TEMPORAL_SERVER"

// A stack on the production server comes up with both of its databases set up at the
// pinned release's schema versions in one step each (the embedded schema at its
// version, no versioned update replayed: one row of update history), records the
// release it prepared them for, and serves its default namespace.
func TestTemporalServerSchemasAreSetUpAtTheirVersion(t *testing.T) {
	if !temporalServerTool.installed() || !temporalSQLTool.installed() {
		if os.Getenv(requireTemporalServerEnv) == "1" {
			t.Fatalf("%s=1 but temporal-server or temporal-sql-tool is not installed under %s", requireTemporalServerEnv, toolsDir())
		}
		t.Skipf("temporal-server %s is not installed under %s (mantisctl dev install --temporal-server)", TemporalServerVersion, toolsDir())
	}
	dir, err := os.MkdirTemp("", "mantis-temporal-schema-")
	require.NoError(t, err)
	require.NoError(t, os.Chmod(dir, 0o755))
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	stack, err := Start(ctx, Options{Dir: dir, Ephemeral: true, Postgres: true, Temporal: true, TemporalServer: true,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))})
	require.NoError(t, err)
	t.Cleanup(func() {
		stopCtx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = stack.Stop(stopCtx)
	})
	require.Equal(t, "server", stack.Env["MANTIS_TEMPORAL_KIND"])
	require.NoError(t, ensureNamespace(ctx, stack.Env["TEMPORAL_ADDRESS"], "default", ""), "the default namespace is served")

	adminURL := stack.Env["MANTIS_POSTGRES_ADMIN_URL"]
	for _, schema := range temporalSchemas {
		conn, err := pgx.Connect(ctx, strings.Replace(adminURL, "/postgres?", "/"+schema.Database+"?", 1))
		require.NoError(t, err, schema.Database)
		var current string
		require.NoError(t, conn.QueryRow(ctx, `SELECT curr_version FROM schema_version`).Scan(&current))
		var updates int
		require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM schema_update_history`).Scan(&updates))
		require.NoError(t, conn.Close(ctx))
		require.Equal(t, schema.Version, current, "%s's schema version", schema.Database)
		require.Equal(t, 1, updates, "%s set up at its version in one step, with no versioned update replayed", schema.Database)
		marker, err := os.ReadFile(filepath.Join(dir, "temporal-server", "schema-"+schema.Database+".version"))
		require.NoError(t, err)
		require.Equal(t, TemporalServerVersion, string(marker))
	}
}
