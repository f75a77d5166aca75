// Package daemon holds what the long-running Mantis commands (thorax, agent) run
// alike.
package daemon

import (
	"context"
	"log/slog"

	"golang.org/x/sync/errgroup"

	"github.com/mantis-deploy/mantis/internal/config"
	"github.com/mantis-deploy/mantis/internal/metricsserver"
)

// RunWithMetrics runs run until ctx ends. When cfg enables the metrics listener it
// first opens it, lets register add the daemon's collectors and readiness to it, and
// then serves it beside run until either fails or ctx ends.
func RunWithMetrics(ctx context.Context, cfg config.Metrics, logger *slog.Logger,
	register func(*metricsserver.Server), run func(context.Context) error,
) error {
	if !cfg.Enabled() {
		return run(ctx)
	}
	metrics, err := metricsserver.Listen(cfg.Listen, logger)
	if err != nil {
		return err
	}
	register(metrics)
	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error { return metrics.Run(ctx) })
	g.Go(func() error { return run(ctx) })
	return g.Wait()
}
