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
	"time"

	"github.com/jackc/pgx/v5"
)

// temporalSchema is one of the production server's databases and the
// temporal-sql-tool embedded schema it takes.
type temporalSchema struct {
	Database, Name string
}

// temporalSchemas are the server's persistence and visibility databases.
var temporalSchemas = []temporalSchema{
	{temporalDatabase, "postgresql/v12/temporal"},
	{temporalVisibilityDatabase, "postgresql/v12/visibility"},
}

// prepareTemporalDatabases makes the temporal role and its two databases, and brings
// their schemas to the pinned release with temporal-sql-tool's embedded schemas. A
// second run finds both up to date and changes nothing.
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
	for _, schema := range temporalSchemas {
		if err := s.prepareTemporalDatabase(ctx, admin, adminURL, schema, password); err != nil {
			return err
		}
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
// the pinned release, logging what it ran and how long each step took.
func (s *Stack) prepareTemporalDatabase(ctx context.Context, admin *pgx.Conn, adminURL string, schema temporalSchema, password string) error {
	db, began := schema.Database, time.Now()
	steps := &sqlToolSteps{}
	defer func() {
		if len(steps.names) > 0 {
			s.logger.Info("temporal-server database prepared", "database", db,
				"steps", strings.Join(steps.names, " "), "elapsed", time.Since(began).Round(time.Millisecond))
		}
	}()
	var exists bool
	if err := admin.QueryRow(ctx, databaseExistsSQL, db).Scan(&exists); err != nil {
		return fmt.Errorf("checking whether database %s exists: %w", db, err)
	}
	if !exists {
		if err := steps.run(ctx, s, db, password, "create-database"); err != nil {
			return err
		}
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
	if versioned {
		if done, err := os.ReadFile(marker); err == nil && string(done) == TemporalServerVersion {
			return nil
		}
	} else if err := steps.run(ctx, s, db, password, "setup-schema", "--version", "0.0"); err != nil {
		return err
	}
	if err := steps.run(ctx, s, db, password, "update-schema", "--schema-name", schema.Name); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(marker), 0o755); err != nil {
		return err
	}
	return os.WriteFile(marker, []byte(TemporalServerVersion), 0o644)
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
