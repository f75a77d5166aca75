package schema

import (
	"context"
	"fmt"
	"time"

	"github.com/mantis-deploy/mantis/schema/internal/dbsqlc"
)

// OfflineTargets returns those of targets that no live Thorax instance serves now
// (none assigned, or its last heartbeat older than heartbeatTimeout), sorted.
func OfflineTargets(ctx context.Context, db DB, targets []string, heartbeatTimeout time.Duration) ([]string, error) {
	names, err := queries.OfflineTargets(ctx, db, dbsqlc.OfflineTargetsParams{
		Targets: targets, HeartbeatTimeoutSeconds: heartbeatTimeout.Seconds(),
	})
	if err != nil {
		return nil, fmt.Errorf("reading which of %d targets are offline: %w", len(targets), err)
	}
	return names, nil
}

// LimitCoverage is a concurrency limit that covers Targets of a set of targets.
type LimitCoverage struct {
	Name       string
	MaxRunning int
	Targets    int
}

// LimitsCoveringTargets returns the concurrency limits that cover some of targets,
// by name, each with how many of them it covers.
func LimitsCoveringTargets(ctx context.Context, db DB, targets []string) ([]LimitCoverage, error) {
	rows, err := queries.LimitsCoveringTargets(ctx, db, targets)
	if err != nil {
		return nil, fmt.Errorf("reading the limits of %d targets: %w", len(targets), err)
	}
	out := make([]LimitCoverage, len(rows))
	for i, r := range rows {
		out[i] = LimitCoverage{Name: r.Name, MaxRunning: int(r.MaxRunning), Targets: int(r.Targets)}
	}
	return out, nil
}
