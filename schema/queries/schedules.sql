-- The catalogue of deployment schedules (schema/schedules.go).

-- name: InsertSchedule :one
INSERT INTO deployment_schedules (name, cron, every, spec, created_by)
VALUES (@name, sqlc.narg(cron), sqlc.narg(every), @spec, @created_by)
ON CONFLICT (name) DO NOTHING
RETURNING *;

-- name: ListSchedules :many
SELECT * FROM deployment_schedules ORDER BY name LIMIT @max_rows;

-- name: GetSchedule :one
SELECT * FROM deployment_schedules WHERE name = @name;

-- name: DeleteSchedule :execrows
DELETE FROM deployment_schedules WHERE name = @name;
