// Command mandible is the Mantis control plane: it owns PostgreSQL, serves the HTTP API
// and Thorax's gRPC service, and runs the Temporal worker for dispatch and deployments.
// Run N replicas against the same database and Temporal namespace to add capacity.
package main

import (
	"context"
	"log/slog"

	"github.com/spf13/cobra"

	"github.com/mantis-deploy/mantis/internal/cli"
	"github.com/mantis-deploy/mantis/internal/config"
	"github.com/mantis-deploy/mantis/internal/telemetry"
)

func main() { cli.Main(newRootCommand()) }

func newRootCommand() *cobra.Command {
	var serveOpts serveOptions
	logConfig := func(c config.Mandible) config.Log { return c.Log }
	root, load := cli.Daemon[config.Mandible]{
		Use:   "mandible",
		Short: "Mantis control plane: HTTP API, gRPC for Thorax, dispatch workers",
		Long: `Mandible is the Mantis control plane. Without a subcommand it serves: it applies
pending schema migrations, then serves the HTTP API and the gRPC service for Thorax
and runs its Temporal worker until SIGINT or SIGTERM.

Configuration comes from --config (TOML), then MANTIS_* environment variables
(MANTIS_<SECTION>_<KEY>, e.g. MANTIS_DATABASE_URL, MANTIS_QUEUE_CA_CERT_PATH).`,
		ConfigUsage: "path to mandible.toml",
		Load:        config.LoadMandible,
		Log:         logConfig,
		Run: func(ctx context.Context, cfg config.Mandible, logger *slog.Logger) error {
			stopTracing, err := telemetry.Start(ctx, cfg.Tracing, telemetry.ServiceMandible, logger)
			if err != nil {
				return err
			}
			defer stopTracing()
			return serve(ctx, cfg, logger, serveOpts)
		},
		Checks: dependencyChecks,
	}.Command()
	root.Flags().BoolVar(&serveOpts.pauseAfterClaim, "test-pause-after-claim", false, "test hook: block every claim before delivery")
	_ = root.Flags().MarkHidden("test-pause-after-claim")
	root.AddCommand(&cobra.Command{
		Use:   "migrate",
		Short: "Apply pending schema migrations and exit",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := load()
			if err != nil {
				return err
			}
			return migrate(cmd.Context(), cfg, slog.New(logConfig(cfg).Handler(cmd.ErrOrStderr())), cmd.OutOrStdout())
		},
	})
	return root
}
