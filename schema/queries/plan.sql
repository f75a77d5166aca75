-- What a deployment plan reads (schema/plan.go); it writes nothing.

-- name: OfflineTargets :many
-- OfflineTargets lists those of the named targets that no live Thorax instance (one
-- with a heartbeat within heartbeat_timeout_seconds) serves now.
SELECT t.name
FROM targets t
LEFT JOIN thorax_instances i ON i.id = t.assigned_instance_id AND i.status = 'live'
    AND i.last_heartbeat_at > now() - make_interval(secs => @heartbeat_timeout_seconds::float8)
WHERE t.name = ANY (@targets::text[]) AND t.deregistered_at IS NULL AND i.id IS NULL
ORDER BY t.name;

-- name: LimitsCoveringTargets :many
-- LimitsCoveringTargets lists the concurrency limits that cover some of the named
-- targets (the per-target default covers them all), with how many they cover.
SELECT l.name, l.max_running, count(t.id)::int AS targets
FROM concurrency_limits l
JOIN targets t ON t.name = ANY (@targets::text[]) AND t.deregistered_at IS NULL AND (
    (l.scope = 'target' AND (l.value IS NULL OR l.value = t.name))
    OR (l.scope = 'label' AND t.labels ->> l.label = l.value))
GROUP BY l.name, l.max_running
ORDER BY l.name;
