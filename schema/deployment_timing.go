package schema

import (
	"context"
	"time"

	"github.com/google/uuid"
)

// DeploymentRunTime returns how long deployment id ran: from its start (its
// creation when it never started) to its end, or to now while it runs. The
// deployment metrics time deployments with it.
func DeploymentRunTime(ctx context.Context, db DB, id uuid.UUID) (time.Duration, error) {
	r, err := queries.DeploymentByID(ctx, db, id)
	if err != nil {
		return 0, notFound(err)
	}
	start, end := r.CreatedAt, time.Now()
	if r.StartedAt != nil {
		start = *r.StartedAt
	}
	if r.FinishedAt != nil {
		end = *r.FinishedAt
	}
	return end.Sub(start), nil
}
