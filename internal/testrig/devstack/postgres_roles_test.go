package devstack_test

import (
	"context"
	"errors"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/testrig/devstack"
)

// requireRefused asserts that err is PostgreSQL refusing with the given SQLSTATE.
func requireRefused(t *testing.T, err error, code, what string) {
	t.Helper()
	var pgErr *pgconn.PgError
	require.True(t, errors.As(err, &pgErr), "%s: want SQLSTATE %s, got %v", what, code, err)
	require.Equal(t, code, pgErr.Code, "%s: %v", what, pgErr)
}

// The stack's mantis role logs in with a password kept 0600, may create databases
// (each test has its own) and is refused by the real server when it creates a role
// or logs in without the password.
func TestPostgresMantisRoleIsNotASuperuser(t *testing.T) {
	t.Parallel()
	dir, err := os.MkdirTemp("", "mantis-pgrole-")
	require.NoError(t, err)
	require.NoError(t, os.Chmod(dir, 0o755))
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	opts := devstack.Options{Dir: dir, Ephemeral: true, Postgres: true,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))}
	stack, err := devstack.Start(ctx, opts)
	require.NoError(t, err)
	t.Cleanup(func() {
		stopCtx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = stack.Stop(stopCtx)
	})

	for _, name := range []string{"postgres-admin-password", "postgres-mantis-password"} {
		info, err := os.Stat(filepath.Join(dir, name))
		require.NoError(t, err)
		require.Equal(t, os.FileMode(0o600), info.Mode().Perm(), name)
	}

	dbURL := stack.Env["DATABASE_URL"]
	u, err := url.Parse(dbURL)
	require.NoError(t, err)
	password, ok := u.User.Password()
	require.True(t, ok, "DATABASE_URL carries the role's password")
	require.NotEmpty(t, password)
	require.Equal(t, "mantis", u.User.Username())

	conn, err := pgx.Connect(ctx, dbURL)
	require.NoError(t, err)
	defer conn.Close(ctx)
	var super, createRole bool
	require.NoError(t, conn.QueryRow(ctx, `SELECT rolsuper, rolcreaterole FROM pg_roles WHERE rolname = current_user`).Scan(&super, &createRole))
	require.False(t, super)
	require.False(t, createRole)

	_, err = conn.Exec(ctx, `CREATE ROLE intruder LOGIN SUPERUSER`)
	requireRefused(t, err, "42501", "creating a role")
	_, err = conn.Exec(ctx, `ALTER ROLE mantis SUPERUSER`)
	requireRefused(t, err, "42501", "making itself a superuser")

	// What the tests need: a database of their own, and the schema in it.
	_, err = conn.Exec(ctx, `CREATE DATABASE own_test`)
	require.NoError(t, err)

	// Without the password the server refuses the login.
	u.User = url.User("mantis")
	_, err = pgx.Connect(ctx, u.String())
	requireRefused(t, err, "28P01", "logging in without a password")

	// A database an administrator creates takes Mantis's schema too.
	admin, err := pgx.Connect(ctx, stack.Env["MANTIS_POSTGRES_ADMIN_URL"])
	require.NoError(t, err)
	defer admin.Close(ctx)
	_, err = admin.Exec(ctx, `CREATE DATABASE admin_made`)
	require.NoError(t, err)
	u, err = url.Parse(dbURL)
	require.NoError(t, err)
	u.Path = "/admin_made"
	other, err := pgx.Connect(ctx, u.String())
	require.NoError(t, err)
	defer other.Close(ctx)
	_, err = other.Exec(ctx, `CREATE TABLE t (id int)`)
	require.NoError(t, err)
}
