package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mantis-deploy/mantis/schema"
)

// DatabaseURL creates an empty database of its own for the test, dropped when the test
// ends, and returns its URL.
func DatabaseURL(t testing.TB) string {
	t.Helper()
	base := env(t, "postgres")["DATABASE_URL"]
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admin, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatalf("testenv: connecting to PostgreSQL: %v", err)
	}
	defer admin.Close(ctx)
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "test_" + hex.EncodeToString(b[:])
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("testenv: creating database: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, base)
		if err != nil {
			t.Logf("testenv: dropping %s: %v", name, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Logf("testenv: dropping %s: %v", name, err)
		}
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("testenv: parsing DATABASE_URL: %v", err)
	}
	u.Path = "/" + name
	return u.String()
}

// Pool opens a pool on a fresh database of the test's own, closed when the test ends.
func Pool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), DatabaseURL(t))
	if err != nil {
		t.Fatalf("testenv: opening pool: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// MigratedPool is Pool with the schema applied.
func MigratedPool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	pool := Pool(t)
	if _, err := schema.Migrate(context.Background(), pool); err != nil {
		t.Fatalf("testenv: migrating: %v", err)
	}
	return pool
}
