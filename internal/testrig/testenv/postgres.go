package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mantis-deploy/mantis/internal/testrig/devstack"
	"github.com/mantis-deploy/mantis/schema"
)

// DatabaseURL creates an empty database of its own for the test, dropped when the test
// ends, and returns its URL.
func DatabaseURL(t testing.TB) string {
	t.Helper()
	return createDatabase(t, env(t, "postgres")["DATABASE_URL"], "")
}

// MigratedDatabaseURL is DatabaseURL with the schema applied. The database is a copy
// of the servers' template database (devstack.PrepareTestTemplate) when they have one
// made from this binary's migrations, and is migrated here otherwise.
func MigratedDatabaseURL(t testing.TB) string {
	t.Helper()
	e := env(t, "postgres")
	if tmpl := usableTemplate(e[devstack.TestTemplateEnvVar]); tmpl != "" {
		return createDatabase(t, e["DATABASE_URL"], tmpl)
	}
	u := createDatabase(t, e["DATABASE_URL"], "")
	pool := openPool(t, u)
	defer pool.Close()
	if _, err := schema.Migrate(context.Background(), pool); err != nil {
		t.Fatalf("testenv: migrating: %v", err)
	}
	return u
}

// Pool opens a pool on a fresh database of the test's own, closed when the test ends.
func Pool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	pool := openPool(t, DatabaseURL(t))
	t.Cleanup(pool.Close)
	return pool
}

// MigratedPool is Pool with the schema applied (MigratedDatabaseURL).
func MigratedPool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	pool := openPool(t, MigratedDatabaseURL(t))
	t.Cleanup(pool.Close)
	return pool
}

func openPool(t testing.TB, databaseURL string) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), databaseURL)
	if err != nil {
		t.Fatalf("testenv: opening pool: %v", err)
	}
	return pool
}

// createDatabase creates a database with a random name on the server of base, a copy
// of template when it is not empty, drops it when the test ends, and returns its URL.
func createDatabase(t testing.TB, base, template string) string {
	t.Helper()
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
	stmt := "CREATE DATABASE " + name
	if template != "" {
		stmt += " TEMPLATE " + pgx.Identifier{template}.Sanitize()
	}
	if _, err := admin.Exec(ctx, stmt); err != nil {
		t.Fatalf("testenv: creating database: %v", err)
	}
	t.Cleanup(func() { dropDatabase(t, base, name) })
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("testenv: parsing DATABASE_URL: %v", err)
	}
	u.Path = "/" + name
	return u.String()
}

func dropDatabase(t testing.TB, base, name string) {
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
}

var (
	// templateName is the template database name for this binary's migrations.
	templateName = sync.OnceValues(devstack.TestTemplateName)
	templateWarn sync.Once
)

// usableTemplate returns the servers' template database, named, when it was made
// from this binary's migrations, and "" otherwise: a mantisctl built before a
// migration changed makes a template this test binary must not copy.
func usableTemplate(named string) string {
	if named == "" {
		return ""
	}
	want, err := templateName()
	if err == nil && want == named {
		return named
	}
	templateWarn.Do(func() {
		if err != nil {
			fmt.Fprintf(os.Stderr, "testenv: naming the template database: %v; migrating each test database instead\n", err)
			return
		}
		fmt.Fprintf(os.Stderr, "testenv: the servers' template database %s holds other migrations than this test binary's (%s); "+
			"migrating each test database instead (rebuild mantisctl)\n", named, want)
	})
	return ""
}
