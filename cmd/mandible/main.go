// Command mandible is the Mantis control plane: it owns PostgreSQL, serves the HTTP API
// and Thorax's gRPC service, and runs the Temporal worker for dispatch and deployments.
// Run N replicas against the same database and Temporal namespace to add capacity.
package main

import (
	"context"
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
		fmt.Fprintln(os.Stderr, "mandible:", err)
		os.Exit(1)
	}
}

func newRootCommand() *cobra.Command {
	var (
		configPath string
		serveOpts  serveOptions
	)
	load := func() (config.Mandible, error) {
		cfg, err := config.LoadMandible(configPath, os.LookupEnv)
		if err != nil {
			return cfg, fmt.Errorf("invalid configuration:\n%w", err)
		}
		return cfg, nil
	}
	root := &cobra.Command{
		Use:   "mandible",
		Short: "Mantis control plane: HTTP API, gRPC for Thorax, dispatch workers",
		Long: `Mandible is the Mantis control plane. Without a subcommand it serves: it applies
pending schema migrations, then serves the HTTP API and the gRPC service for Thorax
and runs its Temporal worker until SIGINT or SIGTERM.

Configuration comes from --config (TOML), then MANTIS_* environment variables
(MANTIS_<SECTION>_<KEY>, e.g. MANTIS_DATABASE_URL, MANTIS_QUEUE_CA_CERT_PATH).`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Args:          cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := load()
			if err != nil {
				return err
			}
			return serve(cmd.Context(), cfg, serveOpts)
		},
	}
	root.PersistentFlags().StringVar(&configPath, "config", "", "path to mandible.toml")
	root.Flags().BoolVar(&serveOpts.pauseAfterClaim, "test-pause-after-claim", false, "test hook: block every claim before delivery")
	_ = root.Flags().MarkHidden("test-pause-after-claim")
	root.AddCommand(
		&cobra.Command{
			Use:   "migrate",
			Short: "Apply pending schema migrations and exit",
			Args:  cobra.NoArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				cfg, err := load()
				if err != nil {
					return err
				}
				return migrate(cmd.Context(), cfg, cmd.OutOrStdout())
			},
		},
		&cobra.Command{
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
		},
	)
	return root
}
