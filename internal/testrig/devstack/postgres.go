package devstack

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/mantis-deploy/mantis/internal/identity"
)

const (
	postgresUser     = "postgres" // the OS user the server runs as when the supervisor is root
	postgresRole     = "mantis"
	postgresDatabase = "mantis"
)

// postgresBinDir finds the PostgreSQL server binaries, which Debian keeps off PATH.
func postgresBinDir() (string, error) {
	for _, v := range []string{"17", "16", "15"} {
		dir := "/usr/lib/postgresql/" + v + "/bin"
		if _, err := os.Stat(filepath.Join(dir, "postgres")); err == nil {
			return dir, nil
		}
	}
	return "", fmt.Errorf("postgresql server binaries: %w (install the postgresql package)", errNotFound)
}

// startPostgres initialises a cluster in dir on first use and runs it on port.
func (s *Stack) startPostgres(ctx context.Context, dir string, port int) error {
	bin, err := postgresBinDir()
	if err != nil {
		return err
	}
	data := filepath.Join(dir, "data")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if err := chownTo(dir, postgresUser); err != nil {
		return err
	}
	adminPassword, err := s.secret("postgres-admin-password")
	if err != nil {
		return err
	}
	password, err := s.secret("postgres-mantis-password")
	if err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(data, "PG_VERSION")); err != nil {
		s.logger.Info("initialising PostgreSQL cluster", "dir", data)
		if err := initCluster(ctx, bin, dir, data, adminPassword); err != nil {
			return err
		}
	}
	tlsArgs, err := s.postgresTLS(dir)
	if err != nil {
		return err
	}
	args := append([]string{"-D", data, "-p", strconv.Itoa(port),
		"-c", "listen_addresses=127.0.0.1",
		"-c", "unix_socket_directories=",
		"-c", "max_connections=300",
		"-c", "log_min_messages=warning"}, tlsArgs...)
	if s.opts.PostgresStatements {
		args = append(args, "-c", "shared_preload_libraries=pg_stat_statements", "-c", "pg_stat_statements.max=2000")
	}
	if s.opts.Ephemeral {
		// Throw-away test clusters trade durability for speed.
		args = append(args, "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off")
	}
	p, err := startProcess(s.logger, processSpec{
		Name: "postgres", Path: filepath.Join(bin, "postgres"), Args: args, RunAs: postgresUser,
		LogPath: filepath.Join(s.opts.Dir, "logs", "postgres.log"), StopSignal: 2, // SIGINT: fast shutdown
	})
	if err != nil {
		return err
	}
	s.track(p)
	adminURL := s.postgresURL(postgresAdmin, adminPassword, port, "postgres")
	legacy := false
	err = waitFor(ctx, p, 60*time.Second, func(ctx context.Context) error {
		err := ensureMantisRole(ctx, adminURL, password)
		if err != nil && legacyCluster(ctx, port) {
			legacy = true
			return nil
		}
		return err
	})
	if err != nil {
		return err
	}
	if legacy {
		// A cluster made before the role lost its rights: its bootstrap superuser is
		// mantis, which cannot be demoted. It keeps working; recreating it fixes it.
		s.logger.Warn("this PostgreSQL cluster's mantis role is its superuser and logs in without a password; "+
			"stop the stack and delete the cluster to recreate it with a restricted role", "dir", data)
		legacyAdmin := s.postgresURL(postgresRole, "", port, "postgres")
		s.Env["DATABASE_URL"] = s.postgresURL(postgresRole, "", port, postgresDatabase)
		s.Env["MANTIS_POSTGRES_ADMIN_URL"] = legacyAdmin
		return nil
	}
	s.Env["DATABASE_URL"] = s.postgresURL(postgresRole, password, port, postgresDatabase)
	s.Env["MANTIS_POSTGRES_ADMIN_URL"] = adminURL
	return nil
}

// postgresTLS gives PostgreSQL a server pair of the stack's CA, copied where its
// own user may read it, and returns the settings that serve TLS with it; with
// PostgresRequireTLS, a pg_hba.conf of the stack's that refuses connections without
// TLS too.
func (s *Stack) postgresTLS(dir string) ([]string, error) {
	cert, key, err := s.Certs.Issue(identity.RolePostgres, "postgres", nil)
	if err != nil {
		return nil, fmt.Errorf("PostgreSQL's certificate: %w", err)
	}
	tlsDir := filepath.Join(dir, "tls")
	if err := os.MkdirAll(tlsDir, 0o700); err != nil {
		return nil, err
	}
	files := map[string]string{"server.crt": cert, "server.key": key}
	for name, from := range files {
		b, err := os.ReadFile(from)
		if err != nil {
			return nil, err
		}
		to := filepath.Join(tlsDir, name)
		if err := os.WriteFile(to, b, 0o600); err != nil {
			return nil, err
		}
		if err := os.Chmod(to, 0o600); err != nil {
			return nil, err
		}
		if err := chownTo(to, postgresUser); err != nil {
			return nil, err
		}
	}
	if err := chownTo(tlsDir, postgresUser); err != nil {
		return nil, err
	}
	args := []string{"-c", "ssl=on", "-c", "ssl_min_protocol_version=TLSv1.2",
		"-c", "ssl_cert_file=" + filepath.Join(tlsDir, "server.crt"),
		"-c", "ssl_key_file=" + filepath.Join(tlsDir, "server.key")}
	if !s.opts.PostgresRequireTLS {
		return args, nil
	}
	hba := filepath.Join(tlsDir, "pg_hba.conf")
	if err := os.WriteFile(hba, []byte(postgresTLSOnlyHBA), 0o600); err != nil {
		return nil, err
	}
	if err := chownTo(hba, postgresUser); err != nil {
		return nil, err
	}
	return append(args, "-c", "hba_file="+hba), nil
}

// postgresTLSOnlyHBA lets in, by password, only connections that use TLS.
const postgresTLSOnlyHBA = `# Written by the Mantis dev stack (PostgresRequireTLS).
hostnossl all all all             reject
hostssl   all all 127.0.0.1/32    scram-sha-256
`

// postgresURL is a loopback URL of the stack's PostgreSQL: plain text, or with
// PostgresRequireTLS, TLS with the server's certificate checked against the CA.
func (s *Stack) postgresURL(role, password string, port int, database string) string {
	if !s.opts.PostgresRequireTLS {
		return postgresURL(role, password, port, database)
	}
	return postgresURLWith(role, password, port, database,
		url.Values{"sslmode": {"verify-full"}, "sslrootcert": {s.Certs.CACert()}})
}
