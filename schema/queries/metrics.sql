-- The state gauges Mandible exports at scrape time (schema/metrics_state.go):
-- aggregate reads, once per scrape.

-- name: ThoraxInstancesByStatus :many
-- ThoraxInstancesByStatus counts Thorax instances by status.
SELECT status, count(*)::int AS instances FROM thorax_instances GROUP BY status;

-- name: RequestsNearExpiry :one
-- RequestsNearExpiry counts the requests not yet dispatched whose expiry is
-- within window_seconds: they expire unless a Thorax claims them soon.
SELECT count(*)::int FROM pending_dispatch_requests
WHERE status IN ('pending', 'processing') AND expires_at < now() + make_interval(secs => @window_seconds::float8);
