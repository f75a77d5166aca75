package soak

import (
	"context"
	"fmt"
	"time"
)

// LatencyMinute is what became of the dispatch requests enqueued in one minute of
// load: how many, how many succeeded, and the time from enqueue (the request's
// created_at) to its command's success (finished_at), from the database.
type LatencyMinute struct {
	Index                             int
	Enqueued, Succeeded, NotSucceeded int
	P50, P99                          time.Duration
	// Completed counts the dispatch commands that succeeded during the minute,
	// whenever enqueued: the throughput the cluster held.
	Completed int
}

// dispatchLatencySQL groups the requests that belong to no deployment by the minute
// of load they were enqueued in ($1 is the load's start) and takes the percentiles
// of their enqueue-to-success times.
const dispatchLatencySQL = `
SELECT floor(extract(epoch FROM r.created_at - $1::timestamptz) / 60)::int + 1 AS minute,
       count(*),
       count(c.finished_at),
       coalesce(percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM c.finished_at - r.created_at)), 0),
       coalesce(percentile_cont(0.99) WITHIN GROUP (ORDER BY extract(epoch FROM c.finished_at - r.created_at)), 0)
FROM pending_dispatch_requests r
LEFT JOIN LATERAL (
    SELECT q.finished_at FROM command_queue q
    WHERE q.dispatch_request_id = r.id AND q.status = 'succeeded'
    ORDER BY q.finished_at LIMIT 1
) c ON true
WHERE r.deployment_id IS NULL AND r.created_at >= $1::timestamptz
GROUP BY 1 HAVING floor(extract(epoch FROM min(r.created_at) - $1::timestamptz) / 60)::int + 1 <= $2
ORDER BY 1`

// completedSQL counts the successes of requests of no deployment by the minute of
// load they finished in.
const completedSQL = `
SELECT floor(extract(epoch FROM q.finished_at - $1::timestamptz) / 60)::int + 1 AS minute, count(*)
FROM command_queue q
WHERE q.deployment_id IS NULL AND q.status = 'succeeded' AND q.finished_at >= $1::timestamptz
GROUP BY 1 ORDER BY 1`

// DispatchLatency returns the first minutes of load's dispatch requests, their
// latency percentiles, and the successes of each minute.
func DispatchLatency(ctx context.Context, db Querier, start time.Time, minutes int) ([]LatencyMinute, error) {
	rows, err := db.Query(ctx, dispatchLatencySQL, start, minutes)
	if err != nil {
		return nil, fmt.Errorf("measuring dispatch latency: %w", err)
	}
	defer rows.Close()
	var out []LatencyMinute
	for rows.Next() {
		var m LatencyMinute
		var p50, p99 float64
		if err := rows.Scan(&m.Index, &m.Enqueued, &m.Succeeded, &p50, &p99); err != nil {
			return nil, fmt.Errorf("measuring dispatch latency: %w", err)
		}
		m.NotSucceeded = m.Enqueued - m.Succeeded
		m.P50, m.P99 = seconds(p50), seconds(p99)
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("measuring dispatch latency: %w", err)
	}
	return out, completed(ctx, db, start, out)
}

// completed fills in each minute's Completed.
func completed(ctx context.Context, db Querier, start time.Time, minutes []LatencyMinute) error {
	rows, err := db.Query(ctx, completedSQL, start)
	if err != nil {
		return fmt.Errorf("counting completed dispatch requests: %w", err)
	}
	defer rows.Close()
	byIndex := map[int]int{}
	for rows.Next() {
		var i, n int
		if err := rows.Scan(&i, &n); err != nil {
			return fmt.Errorf("counting completed dispatch requests: %w", err)
		}
		byIndex[i] = n
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("counting completed dispatch requests: %w", err)
	}
	for i := range minutes {
		minutes[i].Completed = byIndex[minutes[i].Index]
	}
	return nil
}

func seconds(s float64) time.Duration {
	return time.Duration(s * float64(time.Second)).Round(time.Millisecond)
}

// DeploymentMinute counts the deployments created in one minute of load by how
// they ended.
type DeploymentMinute struct {
	Index                               int
	Created, Succeeded, Failed, Unended int
}

const deploymentsSQL = `
SELECT floor(extract(epoch FROM created_at - $1::timestamptz) / 60)::int + 1 AS minute,
       count(*),
       count(*) FILTER (WHERE status = 'succeeded'),
       count(*) FILTER (WHERE status IN ('failed', 'cancelled')),
       count(*) FILTER (WHERE status NOT IN ('succeeded', 'failed', 'cancelled'))
FROM deployments WHERE created_at >= $1::timestamptz
GROUP BY 1 HAVING floor(extract(epoch FROM min(created_at) - $1::timestamptz) / 60)::int + 1 <= $2
ORDER BY 1`

// Deployments counts the deployments of each of the first minutes of load.
func Deployments(ctx context.Context, db Querier, start time.Time, minutes int) ([]DeploymentMinute, error) {
	rows, err := db.Query(ctx, deploymentsSQL, start, minutes)
	if err != nil {
		return nil, fmt.Errorf("counting deployments: %w", err)
	}
	defer rows.Close()
	var out []DeploymentMinute
	for rows.Next() {
		var m DeploymentMinute
		if err := rows.Scan(&m.Index, &m.Created, &m.Succeeded, &m.Failed, &m.Unended); err != nil {
			return nil, fmt.Errorf("counting deployments: %w", err)
		}
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("counting deployments: %w", err)
	}
	return out, nil
}
