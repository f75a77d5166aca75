package schema

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/mantis-deploy/mantis/schema/internal/dbsqlc"
)

// PendingDeploymentsCreatedBefore returns up to limit deployments still pending that
// were created more than age ago, oldest first: candidates for a deployment whose
// workflow never started (activities.FailStrandedDeployments decides).
func PendingDeploymentsCreatedBefore(ctx context.Context, db DB, age time.Duration, limit int) ([]uuid.UUID, error) {
	ids, err := queries.PendingDeploymentsCreatedBefore(ctx, db, dbsqlc.PendingDeploymentsCreatedBeforeParams{
		Age: age, MaxRows: int32(limit),
	})
	if err != nil {
		return nil, fmt.Errorf("listing deployments pending for over %s: %w", age, err)
	}
	return ids, nil
}
