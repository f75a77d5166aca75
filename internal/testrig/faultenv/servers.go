package faultenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mantis-deploy/mantis/internal/testrig/devstack"
)

// TemporalKindVar, set to "server", makes the fault stack run the production
// temporal-server (PostgreSQL persistence) instead of the dev server.
const TemporalKindVar = "MANTIS_FAULT_TEMPORAL"

// serverStartTimeout bounds the start (or restart) of the fault stack's servers.
const serverStartTimeout = 5 * time.Minute

// Servers is a PostgreSQL, a TLS-only RabbitMQ and a Temporal dev server (on a
// persistent SQLite file; or temporal-server on PostgreSQL, see TemporalKindVar) that only the fault tests use, so that they may stop, crash,
// freeze and restart them. PostgreSQL runs durable (fsync on): a crash must not lose
// what it acknowledged.
type Servers struct {
	*devstack.Stack
	dir string
}

// StartServers starts the fault stack in a new directory under the system's temporary
// directory, on free loopback ports.
func StartServers(ctx context.Context) (*Servers, error) {
	dir, err := os.MkdirTemp("", "mantis-fault-")
	if err != nil {
		return nil, err
	}
	// The servers drop privileges and must reach their data.
	if err := os.Chmod(dir, 0o755); err != nil {
		return nil, err
	}
	opts := devstack.Options{
		Dir: dir, Postgres: true, RabbitMQ: true, Temporal: true, PostgresStatements: true,
		TemporalServer: os.Getenv(TemporalKindVar) == "server",
		Logger:         slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	}
	ctx, cancel := context.WithTimeout(ctx, serverStartTimeout)
	defer cancel()
	if err := devstack.Install(ctx, opts.Logger, opts); err != nil {
		return nil, err
	}
	s, err := devstack.Start(ctx, opts)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("starting the fault stack: %w", err)
	}
	return &Servers{Stack: s, dir: dir}, nil
}

// Close stops the servers and removes their data.
func (s *Servers) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	err := s.Stop(ctx)
	_ = os.RemoveAll(s.dir)
	return err
}

// RestartServer starts a stopped or killed server again, waiting until it is ready.
func (s *Servers) RestartServer(server devstack.Server) error {
	ctx, cancel := context.WithTimeout(context.Background(), serverStartTimeout)
	defer cancel()
	return s.Restart(ctx, server)
}

// AdminURL is the URL of the PostgreSQL superuser on the maintenance database.
func (s *Servers) AdminURL() string { return s.Env["MANTIS_POSTGRES_ADMIN_URL"] }

// Database creates an empty database of the test's own and returns its URL. It is
// left behind: the stack's directory goes with the stack.
func (s *Servers) Database(t testing.TB) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admin, err := pgx.Connect(ctx, s.AdminURL())
	if err != nil {
		t.Fatalf("faultenv: connecting to PostgreSQL: %v", err)
	}
	defer admin.Close(ctx)
	name := "fault_" + randomHex(6)
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("faultenv: creating database: %v", err)
	}
	u, err := url.Parse(s.Env["DATABASE_URL"])
	if err != nil {
		t.Fatalf("faultenv: parsing DATABASE_URL: %v", err)
	}
	u.Path = "/" + name
	return u.String()
}

// Broker is how a process reaches the fault stack's RabbitMQ, on a vhost of its test.
type Broker struct {
	Host, User, Password, VHost string
	Port                        int
	CACert, ClientCert, Key     string
}

// VHost creates a vhost of the test's own on the fault stack's broker.
func (s *Servers) VHost(t testing.TB) Broker {
	t.Helper()
	port, _ := strconv.Atoi(s.Env["MANTIS_AMQP_PORT"])
	b := Broker{
		Host: s.Env["MANTIS_AMQP_HOST"], Port: port, User: s.Env["RABBITMQ_USER"], Password: s.Env["RABBITMQ_PASSWORD"],
		CACert: s.Env["MANTIS_CA_CERT"], ClientCert: s.Env["MANTIS_CLIENT_CERT"], Key: s.Env["MANTIS_CLIENT_KEY"],
		VHost: "/fault-" + randomHex(6),
	}
	mgmt, err := devstack.ManagementClient(b.CACert)
	if err != nil {
		t.Fatalf("faultenv: management client: %v", err)
	}
	vh := url.PathEscape(b.VHost)
	api := s.Env["RABBITMQ_MANAGEMENT_URL"] + "/api"
	for _, call := range []struct{ path, body string }{
		{"/vhosts/" + vh, `{}`},
		{"/permissions/" + vh + "/" + b.User, `{"configure":".*","write":".*","read":".*"}`},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := managementPut(ctx, mgmt, api+call.path, b, call.body)
		cancel()
		if err != nil {
			t.Fatalf("faultenv: preparing vhost %s: %v", call.path, err)
		}
	}
	return b
}

func managementPut(ctx context.Context, c *http.Client, url string, b Broker, body string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, url, strings.NewReader(body))
	if err != nil {
		return err
	}
	req.SetBasicAuth(b.User, b.Password)
	req.Header.Set("content-type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		return fmt.Errorf("PUT %s: %s", url, resp.Status)
	}
	return nil
}

// TemporalAddress is the Temporal frontend.
func (s *Servers) TemporalAddress() string { return s.Env["TEMPORAL_ADDRESS"] }

// TemporalKind is "server" for the production temporal-server, "dev" for the dev server.
func (s *Servers) TemporalKind() string {
	if s.Env["MANTIS_TEMPORAL_KIND"] == "server" {
		return "server"
	}
	return "dev"
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
