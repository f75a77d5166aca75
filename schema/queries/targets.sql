-- Targets: registration, reading and listing (schema/targets.go).

-- name: RegisterTarget :one
-- RegisterTarget registers a target or updates the one of that name, registering it
-- again if it was deregistered. A listen-mode target is pinned to the live Thorax
-- instance (a heartbeat within heartbeat_timeout_seconds) with the fewest targets
-- among those whose scope lets them serve it, and keeps its instance on update while
-- that instance lives and may still serve it.
WITH live AS (
    SELECT i.id FROM thorax_instances i
    WHERE i.status = 'live' AND i.last_heartbeat_at > now() - make_interval(secs => @heartbeat_timeout_seconds::float8)
      AND thorax_may_serve(i.scope_patterns, i.scope_labels, @name::text, @labels::jsonb)
), pick AS (
    SELECT l.id FROM live l
    LEFT JOIN targets t ON t.assigned_instance_id = l.id AND t.deregistered_at IS NULL
    GROUP BY l.id ORDER BY count(t.id), l.id LIMIT 1
)
INSERT INTO targets (name, mode, address, labels, assigned_instance_id)
VALUES (@name, @mode::text, sqlc.narg(address), @labels, CASE WHEN @mode::text = 'listen' THEN (SELECT id FROM pick) END)
ON CONFLICT (name) DO UPDATE
SET mode = EXCLUDED.mode, address = EXCLUDED.address, labels = EXCLUDED.labels,
    deregistered_at = NULL, updated_at = now(),
    assigned_instance_id = CASE
        WHEN EXCLUDED.mode = 'poll' THEN targets.assigned_instance_id
        WHEN targets.assigned_instance_id IN (SELECT id FROM live) THEN targets.assigned_instance_id
        ELSE (SELECT id FROM pick) END
RETURNING *;

-- name: ListTargets :many
-- ListTargets lists registered targets by name, a page at a time: those named after
-- after ('' from the first) whose labels hold every key and value of selector ('{}'
-- matches every target), at most max_rows. The unique index on name serves the page,
-- targets_labels (GIN) the selector.
SELECT * FROM targets
WHERE deregistered_at IS NULL
  AND name > @after::text
  AND labels @> @selector::jsonb
ORDER BY name
LIMIT @max_rows;

-- name: GetTarget :one
SELECT * FROM targets WHERE name = @name AND deregistered_at IS NULL;

-- name: DeregisterTarget :execrows
UPDATE targets SET deregistered_at = now(), updated_at = now() WHERE name = @name AND deregistered_at IS NULL;
