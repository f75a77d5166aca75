package workers

import (
	"context"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mantis-deploy/mantis/schema"
)

// RunThoraxMonitor marks Thorax instances that miss heartbeats for timeout as dead,
// reassigning their listen-mode targets and failing the deployments that had commands
// in flight on them. It checks several times per timeout so a failure is acted on
// within it; every replica runs it and the work is done once.
func RunThoraxMonitor(ctx context.Context, db *pgxpool.Pool, timeout time.Duration, logger *slog.Logger) error {
	tick := time.NewTicker(max(timeout/5, 100*time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		dead, err := schema.MarkDeadInstances(ctx, db, timeout)
		if err != nil && ctx.Err() == nil {
			logger.WarnContext(ctx, "checking thorax heartbeats failed", "err", err)
		}
		for _, d := range dead {
			logger.WarnContext(ctx, "thorax instance stopped heartbeating: marked dead",
				"instance_id", d.ID, "name", d.Name, "reassigned_targets", len(d.Reassigned),
				"lost_commands", len(d.LostCommands), "failed_deployments", len(d.FailedDeployments))
		}
	}
}
