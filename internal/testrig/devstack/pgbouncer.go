package devstack

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// pgbouncerPackage is the Debian package of the connection pooler tests put in front
// of PostgreSQL.
const pgbouncerPackage = "pgbouncer"

// PoolModeTransaction is PgBouncer's transaction pooling: a client holds a server
// connection only for the length of a transaction, so nothing of a session (LISTEN,
// session advisory locks, SET, named prepared statements) survives between two.
const PoolModeTransaction = "transaction"

// pgbouncerStartTimeout bounds the wait for PgBouncer to accept connections.
const pgbouncerStartTimeout = 15 * time.Second

// FindPgBouncer returns the pgbouncer binary. It installs nothing: Install with
// Options.TestPackages does, before the tests start.
func FindPgBouncer() (string, error) {
	return findInstalled(pgbouncerDeb)
}

// PgBouncerOptions describe a PgBouncer in front of one database.
type PgBouncerOptions struct {
	// Backend is the database's postgres:// URL, with its user and password: the
	// pooler logs in as that user, and accepts that user and password from clients.
	Backend string
	// PoolMode is PgBouncer's pool_mode; empty means PoolModeTransaction.
	PoolMode string
	// PoolSize is default_pool_size, the server connections per database and user;
	// zero means 5.
	PoolSize int
}

// PgBouncer is a running PgBouncer on a loopback port, serving one database.
type PgBouncer struct {
	// Address is host:port of the pooler.
	Address string
	backend *url.URL
	dir     string
	proc    *process
}

// StartPgBouncer starts PgBouncer in front of opts.Backend, as the postgres user when
// the caller is root (PgBouncer refuses to run as root), and waits until it accepts
// connections. Its configuration and log live in a directory of their own, removed
// by Stop. Each connection it opens to PostgreSQL carries the client's
// application_name followed by " - <client host>:<port>" (application_name_add_host),
// which tells pooled sessions apart in pg_stat_activity.
func StartPgBouncer(ctx context.Context, logger *slog.Logger, opts PgBouncerOptions) (*PgBouncer, error) {
	bin, err := FindPgBouncer()
	if err != nil {
		return nil, err
	}
	backend, err := url.Parse(opts.Backend)
	if err != nil {
		return nil, fmt.Errorf("pgbouncer backend: the URL does not parse")
	}
	dir, err := os.MkdirTemp("", "mantis-pgbouncer-")
	if err != nil {
		return nil, fmt.Errorf("creating pgbouncer directory: %w", err)
	}
	port, err := FreePort(false)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	if err := writePgBouncerConfig(dir, port, backend, opts); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	if err := chownTo(dir, postgresUser); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	logPath := filepath.Join(dir, "pgbouncer.log")
	proc, err := startProcess(logger, processSpec{
		Name: "pgbouncer", Path: bin, Args: []string{filepath.Join(dir, "pgbouncer.ini")},
		Dir: dir, RunAs: postgresUser, LogPath: logPath, StopSignal: syscall.SIGINT, // a safe shutdown
	})
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	b := &PgBouncer{Address: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), backend: backend, dir: dir, proc: proc}
	err = waitFor(ctx, proc, pgbouncerStartTimeout, func(context.Context) error {
		conn, err := net.DialTimeout("tcp", b.Address, time.Second)
		if err != nil {
			return err
		}
		return conn.Close()
	})
	if err != nil {
		b.Stop()
		return nil, fmt.Errorf("pgbouncer did not start: %w: %s", err, tail(logPath, 2000))
	}
	return b, nil
}

// writePgBouncerConfig writes pgbouncer.ini and its auth file into dir.
func writePgBouncerConfig(dir string, port int, backend *url.URL, opts PgBouncerOptions) error {
	user := backend.User.Username()
	password, _ := backend.User.Password()
	dbname := strings.TrimPrefix(backend.Path, "/")
	mode := opts.PoolMode
	if mode == "" {
		mode = PoolModeTransaction
	}
	size := opts.PoolSize
	if size == 0 {
		size = 5
	}
	ini := fmt.Sprintf(`[databases]
%s = host=%s port=%s dbname=%s

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = %d
unix_socket_dir =
pidfile =
auth_type = scram-sha-256
auth_file = %s
pool_mode = %s
default_pool_size = %d
max_client_conn = 500
application_name_add_host = 1
ignore_startup_parameters = extra_float_digits
`, dbname, backend.Hostname(), backend.Port(), dbname, port, filepath.Join(dir, "userlist.txt"), mode, size)
	if err := os.WriteFile(filepath.Join(dir, "pgbouncer.ini"), []byte(ini), 0o600); err != nil {
		return fmt.Errorf("writing pgbouncer.ini: %w", err)
	}
	users := pgbouncerQuote(user) + " " + pgbouncerQuote(password) + "\n"
	if err := os.WriteFile(filepath.Join(dir, "userlist.txt"), []byte(users), 0o600); err != nil {
		return fmt.Errorf("writing the pgbouncer auth file: %w", err)
	}
	return nil
}

// pgbouncerQuote quotes s as the auth file wants: in double quotes, doubled inside.
func pgbouncerQuote(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }

// URL returns the backend's URL with the pooler's address in place of PostgreSQL's:
// the same user, password, database and parameters.
func (b *PgBouncer) URL() string {
	u := *b.backend
	u.Host = b.Address
	return u.String()
}

// Log returns the end of PgBouncer's log, for a failing test's message.
func (b *PgBouncer) Log() string { return tail(filepath.Join(b.dir, "pgbouncer.log"), 4000) }

// Stop ends PgBouncer and removes its directory.
func (b *PgBouncer) Stop() {
	_ = b.proc.stop(5 * time.Second)
	os.RemoveAll(b.dir)
}
