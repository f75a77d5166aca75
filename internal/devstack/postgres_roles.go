package devstack

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/jackc/pgx/v5"
)

// postgresAdmin is the cluster's bootstrap superuser. Mantis never uses it: it is
// for the stack's own set-up and for tests that must break the server.
const postgresAdmin = "postgres"

// initCluster creates a cluster whose superuser is postgresAdmin with password,
// and whose TCP logins all need a password (SCRAM).
func initCluster(ctx context.Context, bin, dir, data, password string) error {
	// initdb runs as the server's user: the password file must be its to read.
	pwfile := filepath.Join(dir, "initdb-password")
	if err := os.WriteFile(pwfile, []byte(password+"\n"), 0o600); err != nil {
		return err
	}
	defer os.Remove(pwfile)
	if err := chownTo(pwfile, postgresUser); err != nil {
		return err
	}
	if _, err := runAs(ctx, postgresUser, nil, filepath.Join(bin, "initdb"), "-D", data, "-U", postgresAdmin,
		"--auth=scram-sha-256", "--pwfile="+pwfile, "-E", "UTF8", "--locale=C"); err != nil {
		return fmt.Errorf("initdb: %w", err)
	}
	return nil
}

// postgresURL is a loopback URL for role with password (none when empty).
func postgresURL(role, password string, port int, database string) string {
	u := url.URL{Scheme: "postgres", Host: fmt.Sprintf("127.0.0.1:%d", port), Path: "/" + database, RawQuery: "sslmode=disable"}
	if password == "" {
		u.User = url.User(role)
	} else {
		u.User = url.UserPassword(role, password)
	}
	return u.String()
}

// ensureMantisRole makes the mantis role a login with password that may create
// databases (each test has its own) and nothing more: not a superuser, no roles.
// It owns the mantis database, and may create tables in databases others create.
func ensureMantisRole(ctx context.Context, adminURL, password string) error {
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	quoted := "'" + strings.ReplaceAll(password, "'", "''") + "'"
	role := pgx.Identifier{postgresRole}.Sanitize()
	stmts := []string{
		`DO $$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '` + postgresRole + `') THEN CREATE ROLE ` + role + `; END IF; END $$`,
		`ALTER ROLE ` + role + ` LOGIN NOSUPERUSER NOCREATEROLE NOREPLICATION NOBYPASSRLS CREATEDB PASSWORD ` + quoted,
	}
	for _, stmt := range stmts {
		if _, err := conn.Exec(ctx, stmt); err != nil {
			return fmt.Errorf("preparing the %s role: %w", postgresRole, err)
		}
	}
	var exists bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, postgresDatabase).Scan(&exists); err != nil {
		return err
	}
	if !exists {
		if _, err := conn.Exec(ctx, "CREATE DATABASE "+postgresDatabase+" OWNER "+role); err != nil {
			return fmt.Errorf("creating the %s database: %w", postgresDatabase, err)
		}
	}
	// Databases copy template1: grant there, so that one an administrator creates
	// (a fault test's, say) lets Mantis create its schema too.
	tmpl, err := pgx.Connect(ctx, strings.Replace(adminURL, "/postgres?", "/template1?", 1))
	if err != nil {
		return err
	}
	defer tmpl.Close(ctx)
	if _, err := tmpl.Exec(ctx, "GRANT CREATE ON SCHEMA public TO "+role); err != nil {
		return fmt.Errorf("granting %s the public schema of template1: %w", postgresRole, err)
	}
	return nil
}

// legacyCluster reports whether the cluster is one made before the mantis role lost
// its superuser rights (initdb -U mantis, trust): mantis connects without a password.
func legacyCluster(ctx context.Context, port int) bool {
	conn, err := pgx.Connect(ctx, postgresURL(postgresRole, "", port, "postgres"))
	if err != nil {
		return false
	}
	defer conn.Close(ctx)
	var super bool
	return conn.QueryRow(ctx, `SELECT rolsuper FROM pg_roles WHERE rolname = current_user`).Scan(&super) == nil && super
}
