package devstack

import (
	"context"
	_ "embed"
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

// postgresURL is a loopback URL for role with password (none when empty), in
// plain text.
func postgresURL(role, password string, port int, database string) string {
	return postgresURLWith(role, password, port, database, url.Values{"sslmode": {"disable"}})
}

// postgresURLWith is postgresURL with the connection parameters query (sslmode and
// sslrootcert, say).
func postgresURLWith(role, password string, port int, database string, query url.Values) string {
	u := url.URL{Scheme: "postgres", Host: fmt.Sprintf("127.0.0.1:%d", port), Path: "/" + database, RawQuery: query.Encode()}
	if password == "" {
		u.User = url.User(role)
	} else {
		u.User = url.UserPassword(role, password)
	}
	return u.String()
}

// The statements that prepare the cluster's roles and databases. They run as its
// superuser and name roles and databases, which no query can take as parameters:
// each builds its statements server-side with format('%I'), executed by execGenerated.
var (
	//go:embed sql/login_role.sql
	loginRoleSQL string
	//go:embed sql/create_database.sql
	createDatabaseSQL string
	//go:embed sql/grant_public_schema.sql
	grantPublicSchemaSQL string
	//go:embed sql/is_superuser.sql
	isSuperuserSQL string
)

// ensureMantisRole makes the mantis role a login with password that may create
// databases (each test has its own) and nothing more: not a superuser, no roles.
// It owns the mantis database, and may create tables in databases others create.
func ensureMantisRole(ctx context.Context, adminURL, password string) error {
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	if err := execGenerated(ctx, conn, loginRoleSQL, postgresRole, password); err != nil {
		return fmt.Errorf("preparing the %s role: %w", postgresRole, err)
	}
	var exists bool
	if err := conn.QueryRow(ctx, databaseExistsSQL, postgresDatabase).Scan(&exists); err != nil {
		return err
	}
	if !exists {
		if err := execGenerated(ctx, conn, createDatabaseSQL, postgresDatabase, postgresRole); err != nil {
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
	if err := execGenerated(ctx, tmpl, grantPublicSchemaSQL, postgresRole); err != nil {
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
	return conn.QueryRow(ctx, isSuperuserSQL).Scan(&super) == nil && super
}
