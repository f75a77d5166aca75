package schema

import (
	"context"
	"fmt"
	"time"
)

// Queries of the state gauges Mandible exports at scrape time. They are
// aggregate reads on indexed columns, run once per scrape.
const (
	thoraxInstancesByStatusSQL = `SELECT status, count(*) FROM thorax_instances GROUP BY status`
	// Requests not yet dispatched whose expiry is within the window: they
	// expire unless a Thorax claims them soon.
	requestsNearExpirySQL = `SELECT count(*) FROM pending_dispatch_requests
		WHERE status IN ('pending', 'processing') AND expires_at < now() + make_interval(secs => $1)`
)

// ThoraxInstanceStatuses are the states a Thorax instance row may be in.
var ThoraxInstanceStatuses = []string{"live", "draining", "dead"}

// ThoraxInstancesByStatus counts Thorax instances by status (live, draining, dead).
func ThoraxInstancesByStatus(ctx context.Context, db DB) (map[string]int, error) {
	rows, err := db.Query(ctx, thoraxInstancesByStatusSQL)
	if err != nil {
		return nil, fmt.Errorf("counting thorax instances by status: %w", err)
	}
	defer rows.Close()
	counts := map[string]int{}
	for rows.Next() {
		var status string
		var n int
		if err := rows.Scan(&status, &n); err != nil {
			return nil, fmt.Errorf("counting thorax instances by status: %w", err)
		}
		counts[status] = n
	}
	return counts, rows.Err()
}

// RequestsNearExpiry counts dispatch requests not yet dispatched that expire
// within window.
func RequestsNearExpiry(ctx context.Context, db DB, window time.Duration) (int, error) {
	var n int
	if err := db.QueryRow(ctx, requestsNearExpirySQL, window.Seconds()).Scan(&n); err != nil {
		return 0, fmt.Errorf("counting dispatch requests near expiry: %w", err)
	}
	return n, nil
}
