// Package testenv gives tests real servers: PostgreSQL, RabbitMQ (TLS, client
// certificates, management plugin) and a Temporal dev server.
//
// Under `make test` the servers are started once for the whole run by
// `mantisctl dev exec`, which names its stack.env in MANTIS_TEST_STACK_ENV. Under a
// plain `go test`, the first test that needs a server starts it for its package, and
// Main stops it afterwards. A server that cannot be started fails the test, saying why;
// tests never skip for want of one. Either way the PostgreSQL server holds a template
// database with the schema migrated (devstack.PrepareTestTemplate), which each
// migrated test database copies.
package testenv

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/mantis-deploy/mantis/internal/testrig/devstack"
)

// StackEnvVar names the stack.env file of servers started for the whole test run.
const StackEnvVar = "MANTIS_TEST_STACK_ENV"

var (
	mu      sync.Mutex
	shared  map[string]string // from StackEnvVar, read once
	started []*devstack.Stack
	comps   = map[string]*component{}
)

type component struct {
	once sync.Once
	env  map[string]string
	err  error
}

// Main runs m and stops any server this package's tests started. Call it from TestMain.
func Main(m *testing.M) int {
	code := m.Run()
	mu.Lock()
	stacks := started
	started = nil
	mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, s := range stacks {
		if err := s.Stop(ctx); err != nil {
			fmt.Fprintf(os.Stderr, "testenv: stopping servers: %v\n", err)
		}
		_ = os.RemoveAll(s.Dir())
	}
	buildMu.Lock()
	if buildDir != "" {
		_ = os.RemoveAll(buildDir)
	}
	buildMu.Unlock()
	return code
}

// env returns the environment of the named server ("postgres", "rabbitmq",
// "temporal"), starting it when the run did not provide one.
func env(t testing.TB, name string) map[string]string {
	t.Helper()
	mu.Lock()
	if shared == nil {
		shared = map[string]string{}
		if path := os.Getenv(StackEnvVar); path != "" {
			e, err := devstack.ReadEnv(path)
			if err != nil {
				mu.Unlock()
				t.Fatalf("testenv: reading %s=%s: %v", StackEnvVar, path, err)
			}
			shared = e
		}
	}
	key := map[string]string{"postgres": "DATABASE_URL", "rabbitmq": "MANTIS_AMQP_URL", "temporal": "TEMPORAL_ADDRESS"}[name]
	if shared[key] != "" {
		e := shared
		mu.Unlock()
		return e
	}
	c, ok := comps[name]
	if !ok {
		c = &component{}
		comps[name] = c
	}
	mu.Unlock()

	c.once.Do(func() { c.env, c.err = startOwn(name) })
	if c.err != nil {
		t.Fatalf("testenv: %s is needed and could not be started: %v", name, c.err)
	}
	return c.env
}

// startOwn starts one server for this test binary.
func startOwn(name string) (map[string]string, error) {
	dir, err := os.MkdirTemp("", "mantis-test-"+name+"-")
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return nil, err
	}
	opts := devstack.Options{
		Dir:       dir,
		Ephemeral: true,
		Postgres:  name == "postgres",
		RabbitMQ:  name == "rabbitmq",
		Temporal:  name == "temporal",
		Logger:    slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if err := devstack.Install(ctx, opts.Logger, opts); err != nil {
		return nil, err
	}
	s, err := devstack.Start(ctx, opts)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	if opts.Postgres {
		// The test processes of a run share no server here: each makes its own template.
		if _, err := s.PrepareTestTemplate(ctx); err != nil {
			_ = s.Stop(ctx)
			_ = os.RemoveAll(dir)
			return nil, err
		}
	}
	mu.Lock()
	started = append(started, s)
	mu.Unlock()
	return s.Env, nil
}

// RepoRoot is the module's root directory.
func RepoRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("testenv: go.mod not found above the working directory")
		}
		dir = parent
	}
}
