// Command thorax is the Mantis execution tier: it consumes the three priority command
// queues, hands commands to agents and reports results to Mandible over gRPC. It has no
// database connection.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/mantis-deploy/mantis/internal/config"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := newRootCommand().ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "thorax:", err)
		os.Exit(1)
	}
}

func newRootCommand() *cobra.Command {
	var configPath string
	load := func() (config.Thorax, error) {
		cfg, err := config.LoadThorax(configPath, os.LookupEnv)
		if err != nil {
			return cfg, fmt.Errorf("invalid configuration:\n%w", err)
		}
		return cfg, nil
	}
	root := &cobra.Command{
		Use:   "thorax",
		Short: "Mantis execution tier: priority-queue consumers and agent hand-off",
		Long: `Thorax consumes mantis.commands.priority.{high,normal,low}, hands commands to
agents (poll or listen mode) and stores results in Mandible over gRPC.

Configuration comes from --config (TOML), then MANTIS_* environment variables
(MANTIS_<SECTION>_<KEY>, e.g. MANTIS_QUEUE_PREFETCH_COUNT).`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Args:          cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if _, err := load(); err != nil {
				return err
			}
			return errors.New("serving is not available in this build yet: only check-config is")
		},
	}
	root.PersistentFlags().StringVar(&configPath, "config", "", "path to thorax.toml")
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
