package schema

import (
	"context"
	"fmt"
	"time"
)

// ThoraxInstancesByStatus counts Thorax instances by status (live, draining, dead).
func ThoraxInstancesByStatus(ctx context.Context, db DB) (map[string]int, error) {
	rows, err := queries.ThoraxInstancesByStatus(ctx, db)
	if err != nil {
		return nil, fmt.Errorf("counting thorax instances by status: %w", err)
	}
	counts := make(map[string]int, len(rows))
	for _, r := range rows {
		counts[r.Status] = int(r.Instances)
	}
	return counts, nil
}

// RequestsNearExpiry counts dispatch requests not yet dispatched that expire
// within window.
func RequestsNearExpiry(ctx context.Context, db DB, window time.Duration) (int, error) {
	n, err := queries.RequestsNearExpiry(ctx, db, window.Seconds())
	if err != nil {
		return 0, fmt.Errorf("counting dispatch requests near expiry: %w", err)
	}
	return int(n), nil
}
