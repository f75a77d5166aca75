package devstack

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// The schema versions of temporal-sql-tool's embedded postgresql/v12 schemas in
// TemporalServerVersion (the server's Version and VisibilityVersion for that plugin,
// which it requires at start). A fresh database is set up at them directly from the
// embedded schema.sql, with no versioned updates to replay.
const (
	temporalSchemaVersion           = "1.18"
	temporalVisibilitySchemaVersion = "1.9"
)

// temporalSchema is one of the production server's databases, the temporal-sql-tool
// embedded schema it takes and that schema's version in TemporalServerVersion.
type temporalSchema struct {
	Database, Name, Version string
}

// temporalSchemas are the server's persistence and visibility databases.
var temporalSchemas = []temporalSchema{
	{temporalDatabase, "postgresql/v12/temporal", temporalSchemaVersion},
	{temporalVisibilityDatabase, "postgresql/v12/visibility", temporalVisibilitySchemaVersion},
}

// prepareTemporalDatabases makes the temporal role and its two databases, both at
// once, and brings their schemas to the pinned release with temporal-sql-tool's
// embedded schemas. A second run finds both up to date and changes nothing.
func (s *Stack) prepareTemporalDatabases(ctx context.Context, password string) error {
	began := time.Now()
	adminURL := s.Env["MANTIS_POSTGRES_ADMIN_URL"]
	if adminURL == "" {
		return errors.New("the production Temporal server needs the stack's PostgreSQL")
	}
	admin, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return fmt.Errorf("connecting to PostgreSQL as its administrator: %w", err)
	}
	defer admin.Close(ctx)
	if err := execGenerated(ctx, admin, loginRoleSQL, temporalRole, password); err != nil {
		return fmt.Errorf("preparing the %s role: %w", temporalRole, err)
	}
	errs := make([]error, len(temporalSchemas))
	var wg sync.WaitGroup
	for i, schema := range temporalSchemas {
		wg.Go(func() { errs[i] = s.prepareTemporalDatabase(ctx, adminURL, schema, password) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	s.logger.Info("temporal-server databases prepared", "elapsed", time.Since(began).Round(time.Millisecond))
	return nil
}

// execGenerated runs a query whose rows are statements, and executes each of them.
func execGenerated(ctx context.Context, conn *pgx.Conn, query string, args ...any) error {
	rows, err := conn.Query(ctx, query, args...)
	if err != nil {
		return err
	}
	stmts, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return err
	}
	for _, stmt := range stmts {
		if _, err := conn.Exec(ctx, stmt); err != nil {
			return err
		}
	}
	return nil
}

// prepareTemporalDatabase creates one database when missing and brings its schema to
// the pinned release: a fresh one is set up at the release's version at once, one set
// up before is updated unless this release already did. It logs what it ran and how
// long each step took.
func (s *Stack) prepareTemporalDatabase(ctx context.Context, adminURL string, schema temporalSchema, password string) error {
	db, began := schema.Database, time.Now()
	steps := &sqlToolSteps{}
	defer func() {
		if len(steps.names) > 0 {
			s.logger.Info("temporal-server database prepared", "database", db,
				"steps", strings.Join(steps.names, " "), "elapsed", time.Since(began).Round(time.Millisecond))
		}
	}()
	if err := s.createTemporalDatabase(ctx, adminURL, db, password, steps); err != nil {
		return err
	}
	conn, err := pgx.Connect(ctx, strings.Replace(adminURL, "/postgres?", "/"+db+"?", 1))
	if err != nil {
		return fmt.Errorf("connecting to %s: %w", db, err)
	}
	defer conn.Close(ctx)
	var versioned bool
	if err := conn.QueryRow(ctx, schemaVersionedSQL).Scan(&versioned); err != nil {
		return fmt.Errorf("reading the schema version of %s: %w", db, err)
	}
	// A schema brought up to this release before is not checked again: the tool's
	// check takes seconds, and a second start should not.
	marker := filepath.Join(s.opts.Dir, "temporal-server", "schema-"+db+".version")
	if !versioned {
		err = steps.run(ctx, s, db, password, "setup-schema", "--schema-name", schema.Name, "--version", schema.Version)
	} else if done, readErr := os.ReadFile(marker); readErr == nil && string(done) == TemporalServerVersion {
		return nil
	} else {
		err = steps.run(ctx, s, db, password, "update-schema", "--schema-name", schema.Name)
	}
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(marker), 0o755); err != nil {
		return fmt.Errorf("recording the schema release of %s: %w", db, err)
	}
	return os.WriteFile(marker, []byte(TemporalServerVersion), 0o644)
}

// createTemporalDatabase creates db with temporal-sql-tool unless it exists.
func (s *Stack) createTemporalDatabase(ctx context.Context, adminURL, db, password string, steps *sqlToolSteps) error {
	admin, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return fmt.Errorf("connecting to PostgreSQL as its administrator: %w", err)
	}
	defer admin.Close(ctx)
	var exists bool
	if err := admin.QueryRow(ctx, databaseExistsSQL, db).Scan(&exists); err != nil {
		return fmt.Errorf("checking whether database %s exists: %w", db, err)
	}
	if exists {
		return nil
	}
	return steps.run(ctx, s, db, password, "create-database")
}

// sqlToolSteps records the temporal-sql-tool commands run on one database, each as
// "name=duration".
type sqlToolSteps struct {
	names []string
}

// run runs one temporal-sql-tool command and records it.
func (st *sqlToolSteps) run(ctx context.Context, s *Stack, db, password string, args ...string) error {
	began := time.Now()
	err := s.sqlTool(ctx, db, password, args...)
	st.names = append(st.names, args[0]+"="+time.Since(began).Round(time.Millisecond).String())
	return err
}

// sqlTool runs one temporal-sql-tool command against db as the temporal role; the
// password goes through the environment, not the command line.
func (s *Stack) sqlTool(ctx context.Context, db, password string, args ...string) error {
	full := append([]string{"--ep", "127.0.0.1", "--port", strconv.Itoa(s.Ports.Postgres),
		"--user", temporalRole, "--plugin", temporalPlugin, "--db", db, "--quiet"}, args...)
	cmd := exec.CommandContext(ctx, temporalSQLTool.path(), full...)
	cmd.Env = append(os.Environ(), "SQL_PASSWORD="+password)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("temporal-sql-tool %s on %s: %w: %s", args[0], db, err, strings.TrimSpace(string(out)))
	}
	return nil
}
