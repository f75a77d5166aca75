-- The deployment event log (schema/events.go, schema/events_read.go).

-- name: InsertEvent :exec
INSERT INTO deployment_events (deployment_id, type, data) VALUES (sqlc.narg(deployment_id), @type, @data);

-- name: ReadEvents :many
-- ReadEvents reads the events with after < id <= through, in id order, at most
-- max_rows: of deployment_id (NULL: any), of a type matching one of the LIKE patterns
-- types (none: any), naming one of targets in data->>'target' (none: any).
SELECT id, deployment_id, type, data, created_at
FROM deployment_events
WHERE id > @after AND id <= @through
  AND (sqlc.narg(deployment_id)::uuid IS NULL OR deployment_id = sqlc.narg(deployment_id)::uuid)
  AND (coalesce(cardinality(@types::text[]), 0) = 0 OR type LIKE ANY (@types::text[]))
  AND (coalesce(cardinality(@targets::text[]), 0) = 0 OR data->>'target' = ANY (@targets::text[]))
ORDER BY id
LIMIT @max_rows;

-- name: LatestEventID :one
-- LatestEventID is the highest id committed to the event log, 0 when it is empty.
SELECT coalesce(max(id), 0)::bigint FROM deployment_events;
