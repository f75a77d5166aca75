// Command agent runs Mantis commands on its host. In poll mode it asks its Thorax for
// work; in listen mode it serves gRPC and Thorax calls it. Results go back through
// Thorax.
package main

import (
	"context"
	"log/slog"

	"github.com/spf13/cobra"

	"github.com/mantis-deploy/mantis/cmd/internal/daemon"
	"github.com/mantis-deploy/mantis/internal/agent"
	"github.com/mantis-deploy/mantis/internal/cli"
	"github.com/mantis-deploy/mantis/internal/config"
	"github.com/mantis-deploy/mantis/internal/metricsserver"
	"github.com/mantis-deploy/mantis/internal/telemetry"
)

// help is the agent's long help: its two modes, how it stops and where its
// configuration comes from.
const help = `The agent runs commands on its host with a timeout, environment and working
directory, and returns exit code and output. In poll mode it long-polls its Thorax;
in listen mode it serves gRPC that Thorax calls. On SIGINT or SIGTERM it takes no
new commands, lets running ones finish within exec.stop_timeout, then kills their
process groups.

Configuration comes from --config (TOML), then MANTIS_* environment variables
(MANTIS_<SECTION>_<KEY>, e.g. MANTIS_MODE, MANTIS_THORAX_ADDRESS).`

func main() { cli.Main(newRootCommand()) }

func newRootCommand() *cobra.Command {
	root, _ := cli.Daemon[config.Agent]{
		Use:         "agent",
		Short:       "Mantis agent: runs commands on this host for Thorax",
		Long:        help,
		ConfigUsage: "path to the agent configuration (TOML)",
		Load:        config.LoadAgent,
		Log:         func(c config.Agent) config.Log { return c.Log },
		Run: func(ctx context.Context, cfg config.Agent, logger *slog.Logger) error {
			logger.InfoContext(ctx, "agent starting", "config", cfg)
			stopTracing, err := telemetry.Start(ctx, cfg.Tracing, telemetry.ServiceAgent, logger)
			if err != nil {
				return err
			}
			defer stopTracing()
			if err := run(ctx, cfg, logger); err != nil {
				return err
			}
			logger.InfoContext(ctx, "agent stopped")
			return nil
		},
		Checks: dependencyChecks,
	}.Command()
	return root
}

// run runs the agent, and its metrics listener when configured, until ctx ends.
func run(ctx context.Context, cfg config.Agent, logger *slog.Logger) error {
	var agentMetrics *agent.Metrics // nil without the metrics listener
	return daemon.RunWithMetrics(ctx, cfg.Metrics, logger, func(metrics *metricsserver.Server) {
		agentMetrics = agent.NewMetrics(metrics.Registry)
		metrics.SetReadiness(agentMetrics.Readiness)
	}, func(ctx context.Context) error { return agent.Run(ctx, cfg, logger, agentMetrics) })
}
