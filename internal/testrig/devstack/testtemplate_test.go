package devstack_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"

	"github.com/mantis-deploy/mantis/internal/testrig/devstack"
	"github.com/mantis-deploy/mantis/schema"
)

// The test template holds every migration, is named after them, takes no
// connections, is made once however often it is asked for, and is copied by many
// sessions at once: what `mantisctl dev exec` prepares and every test's database
// copies.
func TestPrepareTestTemplate(t *testing.T) {
	t.Parallel()
	dir, err := os.MkdirTemp("", "mantis-pgtemplate-")
	require.NoError(t, err)
	require.NoError(t, os.Chmod(dir, 0o755))
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	stack, err := devstack.Start(ctx, devstack.Options{Dir: dir, Ephemeral: true, Postgres: true,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	require.NoError(t, err)
	t.Cleanup(func() {
		stopCtx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = stack.Stop(stopCtx)
	})

	name, err := stack.PrepareTestTemplate(ctx)
	require.NoError(t, err)
	want, err := devstack.TestTemplateName()
	require.NoError(t, err)
	require.Equal(t, want, name)
	require.Equal(t, name, stack.Env[devstack.TestTemplateEnvVar])
	again, err := stack.PrepareTestTemplate(ctx)
	require.NoError(t, err)
	require.Equal(t, name, again)

	base := stack.Env["DATABASE_URL"]
	conn, err := pgx.Connect(ctx, base)
	require.NoError(t, err)
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT datname FROM pg_database WHERE datname LIKE 'mantis_template_%' ORDER BY datname`)
	require.NoError(t, err)
	databases, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Equal(t, []string{name}, databases, "one template, no half-made build left")

	_, err = pgx.Connect(ctx, databaseURL(t, base, name))
	requireRefused(t, err, "55000", "connecting to the template")

	migrations, err := schema.Migrations()
	require.NoError(t, err)
	// Copies made at once, each by a session of its own, as parallel tests make them.
	g, gctx := errgroup.WithContext(ctx)
	for i := range 4 {
		g.Go(func() error {
			c, err := pgx.Connect(gctx, base)
			if err != nil {
				return err
			}
			defer c.Close(context.WithoutCancel(gctx))
			_, err = c.Exec(gctx, fmt.Sprintf("CREATE DATABASE template_copy_%d TEMPLATE %s", i, name))
			return err
		})
	}
	require.NoError(t, g.Wait())
	for i := range 4 {
		c, err := pgx.Connect(ctx, databaseURL(t, base, fmt.Sprintf("template_copy_%d", i)))
		require.NoError(t, err)
		var applied int
		require.NoError(t, c.QueryRow(ctx, `SELECT count(*) FROM schema_migrations`).Scan(&applied))
		require.NoError(t, c.Close(ctx))
		require.Equal(t, len(migrations), applied)
	}
}

// databaseURL is base naming database db.
func databaseURL(t *testing.T, base, db string) string {
	t.Helper()
	u, err := url.Parse(base)
	require.NoError(t, err)
	u.Path = "/" + db
	return u.String()
}
