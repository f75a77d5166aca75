// Command thorax is the Mantis execution tier: it claims commands from Mandible over
// gRPC, hands them to agents (poll or listen mode) and reports results back. It has no
// database connection.
package main

import (
	"context"
	"log/slog"

	"github.com/spf13/cobra"

	"github.com/mantis-deploy/mantis/cmd/internal/daemon"
	"github.com/mantis-deploy/mantis/internal/cli"
	"github.com/mantis-deploy/mantis/internal/config"
	"github.com/mantis-deploy/mantis/internal/metricsserver"
	"github.com/mantis-deploy/mantis/internal/telemetry"
	"github.com/mantis-deploy/mantis/internal/thorax"
)

func main() { cli.Main(newRootCommand()) }

func newRootCommand() *cobra.Command {
	root, _ := cli.Daemon[config.Thorax]{
		Use:   "thorax",
		Short: "Mantis execution tier: claims commands from Mandible and hands them to agents",
		Long: `Thorax registers with Mandible, claims commands over gRPC (on its polling tick),
hands them to agents (poll mode: agents long-poll Thorax; listen mode: Thorax calls
the agent) and stores each result in Mandible. With [queue] enabled it also consumes
RabbitMQ's three priority queues and claims each nudged command at once, high before
normal before low; while the broker is unreachable it polls at
polling.fallback_interval instead. SIGTERM drains: Thorax stops claiming, hands back
what no agent took, waits for running commands (bounded by drain.timeout) and exits 0.

Configuration comes from --config (TOML), then MANTIS_* environment variables
(MANTIS_<SECTION>_<KEY>, e.g. MANTIS_QUEUE_PREFETCH_COUNT).`,
		ConfigUsage: "path to thorax.toml",
		Load:        config.LoadThorax,
		Log:         func(c config.Thorax) config.Log { return c.Log },
		Run:         serve,
		Checks:      dependencyChecks,
	}.Command()
	return root
}

// serve runs Thorax, and its metrics listener when configured, until ctx ends
// (SIGTERM or interrupt), then drains it.
func serve(ctx context.Context, cfg config.Thorax, logger *slog.Logger) error {
	logger.InfoContext(ctx, "starting thorax", "config", cfg)
	stopTracing, err := telemetry.Start(ctx, cfg.Tracing, telemetry.ServiceThorax, logger)
	if err != nil {
		return err
	}
	defer stopTracing()
	th, err := thorax.New(cfg, logger)
	if err != nil {
		return err
	}
	return daemon.RunWithMetrics(ctx, cfg.Metrics, logger, func(metrics *metricsserver.Server) {
		metrics.Registry.MustRegister(th.IdentityMetrics(), th.Metrics())
		metrics.SetReadiness(th.Readiness)
	}, th.Run)
}
