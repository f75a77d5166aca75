// Command agent runs Mantis commands on its host. In poll mode it asks its Thorax for
// work; in listen mode it serves gRPC and Thorax calls it. Results go back through
// Thorax.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"

	"github.com/mantis-deploy/mantis/internal/agent"
	"github.com/mantis-deploy/mantis/internal/config"
	"github.com/mantis-deploy/mantis/internal/metricsserver"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := newRootCommand().ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "agent:", err)
		os.Exit(1)
	}
}

func newRootCommand() *cobra.Command {
	var configPath string
	load := func() (config.Agent, error) {
		cfg, err := config.LoadAgent(configPath, os.LookupEnv)
		if err != nil {
			return cfg, fmt.Errorf("invalid configuration:\n%w", err)
		}
		return cfg, nil
	}
	root := &cobra.Command{
		Use:   "agent",
		Short: "Mantis agent: runs commands on this host for Thorax",
		Long: `The agent runs commands on its host with a timeout, environment and working
directory, and returns exit code and output. In poll mode it long-polls its Thorax;
in listen mode it serves gRPC that Thorax calls. On SIGINT or SIGTERM it takes no
new commands, lets running ones finish within exec.stop_timeout, then kills their
process groups.

Configuration comes from --config (TOML), then MANTIS_* environment variables
(MANTIS_<SECTION>_<KEY>, e.g. MANTIS_MODE, MANTIS_THORAX_ADDRESS).`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Args:          cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := load()
			if err != nil {
				return err
			}
			logger := slog.New(cfg.Log.Handler(cmd.ErrOrStderr()))
			logger.InfoContext(cmd.Context(), "agent starting", "config", cfg)
			if err := run(cmd.Context(), cfg, logger); err != nil {
				return err
			}
			logger.InfoContext(cmd.Context(), "agent stopped")
			return nil
		},
	}
	root.PersistentFlags().StringVar(&configPath, "config", "", "path to the agent configuration (TOML)")
	root.AddCommand(&cobra.Command{
		Use:   "check-config",
		Short: "Load and validate the configuration, print it with secrets redacted, and exit",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := load()
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), cfg.String())
			return nil
		},
	})
	return root
}

// run runs the agent, and its metrics listener when configured, until ctx ends.
func run(ctx context.Context, cfg config.Agent, logger *slog.Logger) error {
	if !cfg.Metrics.Enabled() {
		return agent.Run(ctx, cfg, logger, nil)
	}
	metrics, err := metricsserver.Listen(cfg.Metrics.Listen, logger)
	if err != nil {
		return err
	}
	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error { return metrics.Run(ctx) })
	g.Go(func() error { return agent.Run(ctx, cfg, logger, metrics.Registry) })
	return g.Wait()
}
