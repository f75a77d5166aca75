package devstack

// The test template database: Mantis's schema migrated once per run, which each
// test's database copies (CREATE DATABASE ... TEMPLATE) instead of running every
// migration again.

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	_ "embed"
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mantis-deploy/mantis/schema"
)

// TestTemplateEnvVar names, in the stack's environment, its template database holding
// the migrated schema (PrepareTestTemplate).
const TestTemplateEnvVar = "MANTIS_TEST_DB_TEMPLATE"

var (
	//go:embed sql/drop_database.sql
	dropDatabaseSQL string
	//go:embed sql/seal_template.sql
	sealTemplateSQL string
)

// PostgreSQL's error codes for a database in use and one that exists already.
const (
	pgObjectInUse         = "55006"
	pgDuplicateDatabase   = "42P04"
	templateSealAttempts  = 200
	templateSealRetryWait = 50 * time.Millisecond
)

// TestTemplateName is the name of the template database for the migrations this
// binary embeds: it carries a hash of every migration's version, name and SQL, so a
// template made from other migrations is never taken for this one.
func TestTemplateName() (string, error) {
	migrations, err := schema.Migrations()
	if err != nil {
		return "", err
	}
	h := sha256.New()
	for _, m := range migrations {
		fmt.Fprintf(h, "%d %s %s\n", m.Version, m.Name, m.Checksum())
	}
	return fmt.Sprintf("mantis_template_%x", h.Sum(nil)[:6]), nil
}

// PrepareTestTemplate makes sure the stack's PostgreSQL holds the template database
// of TestTemplateName, migrated, and names it in Env under TestTemplateEnvVar. The
// template is built under a name of its own and renamed once complete, so a
// half-made one is never used, and it takes no connections afterwards, so that
// nothing connected to it makes a copy fail. It returns the template's name.
func (s *Stack) PrepareTestTemplate(ctx context.Context) (string, error) {
	base := s.Env["DATABASE_URL"]
	if base == "" {
		return "", errors.New("test template: the stack runs no PostgreSQL")
	}
	name, err := TestTemplateName()
	if err != nil {
		return "", err
	}
	began := time.Now()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		return "", fmt.Errorf("test template: connecting to PostgreSQL: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var exists bool
	if err := conn.QueryRow(ctx, databaseExistsSQL, name).Scan(&exists); err != nil {
		return "", fmt.Errorf("test template: checking whether %s exists: %w", name, err)
	}
	if !exists {
		if err := buildTestTemplate(ctx, conn, base, name); err != nil {
			return "", fmt.Errorf("test template %s: %w", name, err)
		}
		s.logger.Info("test template database ready", "database", name, "elapsed", time.Since(began).Round(time.Millisecond))
	}
	s.Env[TestTemplateEnvVar] = name
	return name, nil
}

// buildTestTemplate creates a database under a name of its own, migrates it and
// seals it as name. When another caller sealed one first, it drops its own.
func buildTestTemplate(ctx context.Context, conn *pgx.Conn, baseURL, name string) error {
	build := fmt.Sprintf("%s_build_%x", name, randomBytes(4))
	if err := execGenerated(ctx, conn, createDatabaseSQL, build, postgresRole); err != nil {
		return fmt.Errorf("creating %s: %w", build, err)
	}
	sealed := false
	defer func() {
		if !sealed {
			_ = execGenerated(context.WithoutCancel(ctx), conn, dropDatabaseSQL, build)
		}
	}()
	if err := migrateDatabase(ctx, baseURL, build); err != nil {
		return err
	}
	err := sealTestTemplate(ctx, conn, build, name)
	if pgCode(err) == pgDuplicateDatabase {
		return nil
	}
	sealed = err == nil
	return err
}

// migrateDatabase applies the schema to database db of the server baseURL names,
// and closes its connection again.
func migrateDatabase(ctx context.Context, baseURL, db string) error {
	u, err := url.Parse(baseURL)
	if err != nil {
		return fmt.Errorf("parsing DATABASE_URL: %w", err)
	}
	u.Path = "/" + db
	pool, err := pgxpool.New(ctx, u.String())
	if err != nil {
		return err
	}
	defer pool.Close()
	if _, err := schema.Migrate(ctx, pool); err != nil {
		return fmt.Errorf("migrating: %w", err)
	}
	return nil
}

// sealTestTemplate closes build to connections and renames it to name. A session
// that has just disconnected may not have ended yet, and a database in use cannot be
// renamed: it tries again for a while.
func sealTestTemplate(ctx context.Context, conn *pgx.Conn, build, name string) error {
	var err error
	for range templateSealAttempts {
		if err = execGenerated(ctx, conn, sealTemplateSQL, build, name); pgCode(err) != pgObjectInUse {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(templateSealRetryWait):
		}
	}
	return fmt.Errorf("sealing %s: %w", build, err)
}

// pgCode is the SQLSTATE of a PostgreSQL error, or "".
func pgCode(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code
	}
	return ""
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return b
}
