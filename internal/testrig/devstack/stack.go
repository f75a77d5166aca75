// Package devstack runs Mantis's backing servers — PostgreSQL, RabbitMQ (TLS only) and the
// Temporal dev server — as supervised local processes, for `make run` and for the test
// harness. Data lives under one directory and is reused on the next start.
package devstack

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/mantis-deploy/mantis/internal/devcerts"
)

// Ports fixes where each server listens. Zero fields are chosen free at start.
type Ports struct {
	Postgres           int
	AMQPS              int
	RabbitMQManagement int
	RabbitMQDist       int
	EPMD               int
	Temporal           int
	TemporalUI         int
	TemporalHTTP       int
	TemporalMetrics    int
}

// DefaultPorts are the well-known local ports of `make run`.
func DefaultPorts() Ports {
	return Ports{
		Postgres: 5433, AMQPS: 5671, RabbitMQManagement: 15671, RabbitMQDist: 25671, EPMD: 4369,
		Temporal: 7233, TemporalUI: 8233, TemporalHTTP: 7243, TemporalMetrics: 7263,
	}
}

// Options selects what Start runs and where.
type Options struct {
	// Dir holds data, logs, certificates and stack.env.
	Dir   string
	Ports Ports
	// Ephemeral trades durability for speed (test clusters).
	Ephemeral bool
	Postgres  bool
	// PostgresRequireTLS makes PostgreSQL refuse connections without TLS, and the
	// stack's database URLs ask for TLS with the server's certificate checked
	// (sslmode=verify-full against the stack's CA). PostgreSQL serves TLS either way.
	PostgresRequireTLS bool
	// PostgresStatements loads pg_stat_statements, so that a run can count the
	// statements it caused (the soak's report); the extension itself is created by
	// whoever reads it.
	PostgresStatements bool
	RabbitMQ           bool
	Temporal           bool
	// TemporalServer runs the production temporal-server (PostgreSQL persistence and
	// SQL visibility in the stack's PostgreSQL, plus the Web UI server) instead of
	// the dev server. It needs Postgres.
	TemporalServer bool
	// TemporalAuthorization turns on temporal-server's JWT claim mapper and default
	// authorizer, with the stack as the token issuer (TemporalToken). Every call
	// then needs a token; the stack's Web UI server is not started.
	TemporalAuthorization bool
	// UICodecEndpoint, when set, is the remote codec the Temporal Web UI decodes
	// payloads with (Mandible's /codec).
	UICodecEndpoint string
	// TestPackages makes Install also install the Debian packages the test suite
	// runs (TestPackageNames): PgBouncer, stunnel and Chromium.
	TestPackages bool
	Logger       *slog.Logger
}

// Stack is a running set of servers.
type Stack struct {
	opts Options
	// Env holds how to reach every part, as written to stack.env.
	Env    map[string]string
	Certs  devcerts.Bundle
	Ports  Ports
	logger *slog.Logger

	mu          sync.Mutex
	procs       []*process
	rabbitmqEnv []string
	epmdPort    int
	// dataRoot is where PostgreSQL and RabbitMQ keep their data.
	dataRoot string
	// starters start each enabled server again on its ports and data (restart.go).
	starters map[Server]func(context.Context) error
	// temporalServerPorts are the production Temporal server's internal ports,
	// chosen at its first start.
	temporalServerPorts *temporalServerPorts
	// issuer signs Temporal tokens and serves their key (TemporalAuthorization).
	issuer *temporalIssuer
}

// Start brings up the selected servers, in parallel, and returns once all are ready.
// On error, whatever was started is stopped again.
func Start(ctx context.Context, opts Options) (*Stack, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	dir, err := filepath.Abs(opts.Dir)
	if err != nil {
		return nil, err
	}
	opts.Dir = dir
	if opts.TemporalAuthorization && !opts.TemporalServer {
		return nil, errors.New("temporal authorization needs the production Temporal server: enable TemporalServer too")
	}
	if opts.PostgresRequireTLS && opts.TemporalServer {
		return nil, errors.New("the production Temporal server's database connections are plain text in this stack: " +
			"PostgresRequireTLS cannot be combined with TemporalServer")
	}
	if opts.TemporalServer && opts.Temporal && !opts.Postgres {
		return nil, errors.New("the production Temporal server keeps its data in the stack's PostgreSQL: enable Postgres too")
	}
	if err := os.MkdirAll(filepath.Join(dir, "logs"), 0o755); err != nil {
		return nil, fmt.Errorf("creating stack directory: %w", err)
	}
	s := &Stack{opts: opts, Env: map[string]string{}, logger: opts.Logger}
	if s.Ports, err = resolvePorts(opts.Ports); err != nil {
		return nil, err
	}
	if s.Certs, err = devcerts.Generate(filepath.Join(dir, "certs"), []string{"localhost", "127.0.0.1"}); err != nil {
		return nil, fmt.Errorf("writing dev certificates: %w", err)
	}
	s.Env["MANTIS_CA_CERT"] = s.Certs.CACert()
	s.Env["MANTIS_STACK_DIR"] = dir

	serverRoot, err := s.serverRoot(ctx)
	if err != nil {
		return nil, err
	}
	var (
		wg   sync.WaitGroup
		errs = make([]error, 3)
	)
	run := func(i int, enabled bool, f func() error) {
		if !enabled {
			return
		}
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = f() }()
	}
	s.dataRoot = serverRoot
	s.starters = s.newStarters(dir, serverRoot)
	// The production Temporal server keeps its data in PostgreSQL: it starts once that
	// is up, alongside the broker.
	postgresUp := make(chan error, 1)
	run(0, opts.Postgres, func() error {
		err := s.starters[ServerPostgres](ctx)
		postgresUp <- err
		return err
	})
	run(1, opts.RabbitMQ, func() error { return s.starters[ServerRabbitMQ](ctx) })
	run(2, opts.Temporal, func() error {
		if opts.TemporalServer {
			if err := <-postgresUp; err != nil {
				return errors.New("temporal-server not started: PostgreSQL did not start")
			}
		}
		return s.starters[ServerTemporal](ctx)
	})
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		_ = s.Stop(stopCtx)
		return nil, err
	}
	return s, nil
}

// newStarters returns what starts each server on the stack's ports and data (and
// starts it again, restart.go): PostgreSQL and RabbitMQ under serverRoot, Temporal
// under dir.
func (s *Stack) newStarters(dir, serverRoot string) map[Server]func(context.Context) error {
	return map[Server]func(context.Context) error{
		ServerPostgres: func(ctx context.Context) error {
			return s.startPostgres(ctx, filepath.Join(serverRoot, "postgres"), s.Ports.Postgres)
		},
		ServerRabbitMQ: func(ctx context.Context) error {
			password, err := s.secret("rabbitmq-password")
			if err != nil {
				return err
			}
			return s.startRabbitMQ(ctx, filepath.Join(serverRoot, "rabbitmq"), rabbitmqPorts{
				AMQPS: s.Ports.AMQPS, Management: s.Ports.RabbitMQManagement, Dist: s.Ports.RabbitMQDist, EPMD: s.Ports.EPMD,
			}, password)
		},
		ServerTemporal: func(ctx context.Context) error {
			ports := temporalPorts{
				Frontend: s.Ports.Temporal, UI: s.Ports.TemporalUI, HTTP: s.Ports.TemporalHTTP, Metrics: s.Ports.TemporalMetrics,
			}
			if s.opts.TemporalServer {
				return s.startTemporalServer(ctx, filepath.Join(dir, "temporal-server"), ports)
			}
			return s.startTemporal(ctx, filepath.Join(dir, "temporal"), ports)
		},
	}
}

// serverRoot is where the servers that drop privileges keep their data: the stack
// directory when their users can reach it, otherwise a directory under /var/tmp keyed
// by the stack directory (a checkout under a mode-0700 home, say).
func (s *Stack) serverRoot(ctx context.Context) (string, error) {
	if reachableBy(ctx, postgresUser, s.opts.Dir) && reachableBy(ctx, rabbitmqUser, s.opts.Dir) {
		return s.opts.Dir, nil
	}
	sum := sha256.Sum256([]byte(s.opts.Dir))
	root := filepath.Join("/var/tmp", "mantis-"+hex.EncodeToString(sum[:6]))
	if err := os.MkdirAll(root, 0o755); err != nil {
		return "", err
	}
	if err := os.Chmod(root, 0o755); err != nil {
		return "", err
	}
	s.logger.Info("stack directory is not reachable by the server users; keeping server data elsewhere", "dir", root)
	return root, nil
}

// secret returns a random secret persisted under name in the stack directory, so a
// reused broker keeps accepting it.
func (s *Stack) secret(name string) (string, error) {
	path := filepath.Join(s.opts.Dir, name)
	if b, err := os.ReadFile(path); err == nil && len(strings.TrimSpace(string(b))) >= 16 {
		// Secrets stay private, whatever an earlier run or a user made of the mode.
		if err := os.Chmod(path, 0o600); err != nil {
			return "", fmt.Errorf("restricting %s to its owner: %w", path, err)
		}
		return strings.TrimSpace(string(b)), nil
	}
	buf := make([]byte, 18)
	if _, err := rand.Read(buf); err != nil {
		return "", err
	}
	v := hex.EncodeToString(buf)
	if err := os.WriteFile(path, []byte(v+"\n"), 0o600); err != nil {
		return "", err
	}
	return v, nil
}

// Secret is the exported form of secret, for parts of the stack started by callers
// (the API token, say).
func (s *Stack) Secret(name string) (string, error) { return s.secret(name) }

// Dir is the stack directory.
func (s *Stack) Dir() string { return s.opts.Dir }

// Logger is the stack's logger.
func (s *Stack) Logger() *slog.Logger { return s.logger }

func (s *Stack) track(p *process) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.procs = append(s.procs, p)
}

// Exited returns the name of a server that has stopped on its own, or "".
func (s *Stack) Exited() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range s.procs {
		if p.exited() {
			return p.name
		}
	}
	return ""
}

// Stop shuts every server down, newest first, and waits for them.
func (s *Stack) Stop(ctx context.Context) error {
	s.mu.Lock()
	procs := append([]*process(nil), s.procs...)
	s.procs = nil
	issuer := s.issuer
	s.mu.Unlock()
	grace := 20 * time.Second
	if d, ok := ctx.Deadline(); ok {
		grace = time.Until(d)
	}
	// Mantis's own processes stop first, newest first, one after another, while the
	// servers they shut down against are still up; then the servers, together.
	var errs []error
	var servers []*process
	for i := len(procs) - 1; i >= 0; i-- {
		if procs[i].server {
			servers = append(servers, procs[i])
			continue
		}
		errs = append(errs, procs[i].stop(grace))
	}
	var (
		wg         sync.WaitGroup
		serverErrs = make([]error, len(servers))
	)
	for i, p := range servers {
		wg.Add(1)
		go func() { defer wg.Done(); serverErrs[i] = p.stop(grace) }()
	}
	wg.Wait()
	s.stopEPMD(ctx)
	if issuer != nil {
		issuer.close()
	}
	return errors.Join(append(errs, serverErrs...)...)
}

// Spawn starts a Mantis process as part of the stack: it is supervised and stopped
// with the servers, and its output goes to logs/<name>.log.
func (s *Stack) Spawn(name, path string, args, env []string) error {
	p, err := startProcess(s.logger, processSpec{
		Name: name, Path: path, Args: args, Env: env, Dir: s.opts.Dir,
		LogPath: filepath.Join(s.opts.Dir, "logs", name+".log"),
	})
	if err != nil {
		return err
	}
	p.server = false
	s.track(p)
	return nil
}

// LogPath is where the named process writes its output.
func (s *Stack) LogPath(name string) string { return filepath.Join(s.opts.Dir, "logs", name+".log") }

// WaitHTTP waits until url answers 200, or the named process exits.
func (s *Stack) WaitHTTP(ctx context.Context, name, url string, timeout time.Duration) error {
	s.mu.Lock()
	var p *process
	for _, q := range s.procs {
		if q.name == name {
			p = q
		}
	}
	s.mu.Unlock()
	return waitFor(ctx, p, timeout, func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s: %s", url, resp.Status)
		}
		return nil
	})
}
