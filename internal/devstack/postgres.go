package devstack

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
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
	if _, err := os.Stat(filepath.Join(data, "PG_VERSION")); err != nil {
		s.logger.Info("initialising PostgreSQL cluster", "dir", data)
		if _, err := runAs(ctx, postgresUser, nil, filepath.Join(bin, "initdb"),
			"-D", data, "-U", postgresRole, "--auth=trust", "-E", "UTF8", "--locale=C"); err != nil {
			return fmt.Errorf("initdb: %w", err)
		}
	}
	args := []string{"-D", data, "-p", strconv.Itoa(port),
		"-c", "listen_addresses=127.0.0.1",
		"-c", "unix_socket_directories=",
		"-c", "max_connections=300",
		"-c", "log_min_messages=warning"}
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
	adminURL := fmt.Sprintf("postgres://%s@127.0.0.1:%d/postgres?sslmode=disable", postgresRole, port)
	err = waitFor(ctx, p, 60*time.Second, func(ctx context.Context) error {
		conn, err := pgx.Connect(ctx, adminURL)
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		var exists bool
		if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, postgresDatabase).Scan(&exists); err != nil {
			return err
		}
		if !exists {
			if _, err := conn.Exec(ctx, "CREATE DATABASE "+postgresDatabase); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	s.Env["DATABASE_URL"] = fmt.Sprintf("postgres://%s@127.0.0.1:%d/%s?sslmode=disable", postgresRole, port, postgresDatabase)
	s.Env["MANTIS_POSTGRES_ADMIN_URL"] = adminURL
	return nil
}
