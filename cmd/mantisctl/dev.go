package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/mantis-deploy/mantis/internal/devcerts"
	"github.com/mantis-deploy/mantis/internal/testrig/devstack"
)

// exitCode carries a child's exit status out of `dev exec`.
type exitCode int

func (e exitCode) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

func newDevCommand() *cobra.Command {
	dev := &cobra.Command{
		Use:   "dev",
		Short: "Run Mantis and its servers locally (PostgreSQL, RabbitMQ with TLS, Temporal)",
	}
	dev.AddCommand(newDevUpCommand(), newDevExecCommand(), newDevCertsCommand(), newDevInstallCommand())
	return dev
}

func devLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

// allServers selects every server; temporalServer runs the production temporal-server
// in place of the dev server.
func allServers(dir string, temporalServer bool) devstack.Options {
	return devstack.Options{Dir: dir, Postgres: true, RabbitMQ: true, Temporal: true, TemporalServer: temporalServer, Logger: devLogger()}
}

// temporalServerFlag is the flag that selects the production Temporal server.
const (
	temporalServerFlag  = "temporal-server"
	temporalServerUsage = "run temporal-server " + devstack.TemporalServerVersion +
		" (PostgreSQL persistence, SQL visibility, its Web UI) instead of the Temporal dev server; installed on first use"
)

// testPackagesFlag is the flag that also installs the Debian packages the test suite
// runs besides the servers.
const testPackagesFlag = "test-packages"

var testPackagesUsage = "also install the packages the test suite runs (" + strings.Join(devstack.TestPackageNames(), ", ") + ")"

func newDevInstallCommand() *cobra.Command {
	var temporalServer, testPackages bool
	cmd := &cobra.Command{
		Use:   "install",
		Short: "Install what the local stack needs and the machine lacks (temporal CLI, RabbitMQ)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts := allServers("", temporalServer)
			opts.TestPackages = testPackages
			return devstack.Install(cmd.Context(), devLogger(), opts)
		},
	}
	cmd.Flags().BoolVar(&temporalServer, temporalServerFlag, false, "also install "+temporalServerUsage[len("run "):])
	cmd.Flags().BoolVar(&testPackages, testPackagesFlag, false, testPackagesUsage)
	return cmd
}

func newDevCertsCommand() *cobra.Command {
	var dir string
	var hosts, issue []string
	cmd := &cobra.Command{
		Use:   "certs",
		Short: "Write a development CA and certificate pairs for Mandible, the broker, Thorax, agents and clients",
		Long: `Write a development CA and certificate pairs for Mandible, the broker, Thorax, agents and clients.

Each certificate names a role and a name (spiffe://mantis/<role>/<name>). The shared
"agent" pair speaks only for a target called "agent": give every agent, poll or
listen, a pair of its own with --issue agent/<target>. Thorax calls a listen target
only at a server whose certificate names that target, and a listen agent refuses to
start with a certificate naming another.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			b, err := devcerts.Generate(dir, hosts)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "CA           %s\n", b.CACert())
			for _, name := range []string{"mandible", "rabbitmq", "thorax", "agent", "client"} {
				c, k := b.Pair(name)
				fmt.Fprintf(out, "%-12s %s %s\n", name, c, k)
			}
			return issueNamed(out, b, issue, hosts)
		},
	}
	cmd.Flags().StringVar(&dir, "dir", ".mantis/certs", "directory to write the certificates to")
	cmd.Flags().StringSliceVar(&hosts, "host", []string{"localhost", "127.0.0.1"}, "extra DNS names or IPs for the server certificates")
	cmd.Flags().StringArrayVar(&issue, "issue", nil, "also issue a pair for role/name (agent/<target>, thorax/<instance>), as <role>-<name>.crt; repeatable")
	return cmd
}

func newDevExecCommand() *cobra.Command {
	var (
		dir                          string
		temporalServer, testPackages bool
	)
	cmd := &cobra.Command{
		Use:   "exec [flags] -- COMMAND [ARGS...]",
		Short: "Start PostgreSQL, RabbitMQ and Temporal on free ports, run COMMAND with their addresses, then stop them",
		Long: `Start throw-away servers on free loopback ports, run COMMAND with
MANTIS_TEST_STACK_ENV naming their stack.env (and the same variables exported),
stop the servers, and exit with COMMAND's status. ` + "`make test`" + ` runs the suite this way.

Before COMMAND starts, the schema is migrated once into a template database, named in
` + devstack.TestTemplateEnvVar + `, which each test's database copies.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			logger := devLogger()
			opts := allServers(dir, temporalServer)
			opts.Ephemeral = true
			opts.TestPackages = testPackages
			if err := devstack.Install(ctx, logger, opts); err != nil {
				return err
			}
			// Test servers start from scratch every run: nothing leaks from one to the next.
			if err := os.RemoveAll(filepath.Join(dir, "postgres")); err != nil {
				return err
			}
			_ = os.RemoveAll(filepath.Join(dir, "rabbitmq"))
			_ = os.RemoveAll(filepath.Join(dir, "temporal"))
			_ = os.RemoveAll(filepath.Join(dir, "temporal-server"))
			start := time.Now()
			stack, err := devstack.Start(ctx, opts)
			if err != nil {
				return err
			}
			defer func() {
				stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 60*time.Second)
				defer cancel()
				if err := stack.Stop(stopCtx); err != nil {
					logger.Warn("stopping servers", "err", err)
				}
			}()
			// The tests' template database is made here, once, before the packages'
			// test processes start in parallel and copy it.
			if _, err := stack.PrepareTestTemplate(ctx); err != nil {
				return err
			}
			envPath := filepath.Join(stack.Dir(), "stack.env")
			if err := stack.WriteEnv(envPath, nil); err != nil {
				return err
			}
			logger.Info("servers ready", "elapsed", time.Since(start).Round(time.Millisecond), "env", envPath)

			child := exec.CommandContext(ctx, args[0], args[1:]...)
			child.Stdin, child.Stdout, child.Stderr = os.Stdin, os.Stdout, os.Stderr
			child.Env = os.Environ()
			for k, v := range stack.Env {
				child.Env = append(child.Env, k+"="+v)
			}
			child.Env = append(child.Env, "MANTIS_TEST_STACK_ENV="+envPath)
			child.Cancel = func() error { return child.Process.Signal(syscall.SIGTERM) }
			child.WaitDelay = 30 * time.Second
			err = child.Run()
			var exitErr *exec.ExitError
			if errors.As(err, &exitErr) {
				return exitCode(exitErr.ExitCode())
			}
			return err
		},
	}
	cmd.Flags().StringVar(&dir, "dir", ".mantis/test", "directory for the servers' data and logs")
	cmd.Flags().BoolVar(&temporalServer, temporalServerFlag, false, temporalServerUsage)
	cmd.Flags().BoolVar(&testPackages, testPackagesFlag, false, testPackagesUsage+" before COMMAND starts")
	return cmd
}
