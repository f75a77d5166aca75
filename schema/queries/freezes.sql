-- Freeze windows and the deployments that override them (schema/freezes.go).

-- name: InsertFreeze :one
INSERT INTO freezes (name, selector, reason, starts_at, ends_at, weekly, created_by)
VALUES (@name, @selector, @reason, sqlc.narg(starts_at), sqlc.narg(ends_at), sqlc.narg(weekly), @created_by)
ON CONFLICT (name) DO NOTHING
RETURNING *;

-- name: ListFreezes :many
SELECT * FROM freezes ORDER BY name;

-- name: GetFreeze :one
SELECT * FROM freezes WHERE name = @name;

-- name: DeleteFreeze :execrows
DELETE FROM freezes WHERE name = @name;

-- name: FreezesMatchingTargets :many
-- FreezesMatchingTargets lists the freezes not yet over whose selector matches one
-- of the named targets, with how many it matches and the first of them; whether a
-- weekly window is open now is for the caller to decide.
SELECT f.name, f.selector, f.reason, f.starts_at, f.ends_at, f.weekly,
       count(t.id)::int AS matched, min(t.name)::text AS first_target
FROM freezes f
JOIN targets t ON t.labels @> f.selector
WHERE t.name = ANY (@targets::text[]) AND t.deregistered_at IS NULL
  AND (f.ends_at IS NULL OR f.ends_at > now())
GROUP BY f.name
ORDER BY f.name;

-- name: RecordFreezeOverride :exec
UPDATE deployments SET freeze_override_by = @actor, freeze_overrides = @freezes::text[] WHERE id = @id;

-- name: DeploymentFreezeState :one
-- DeploymentFreezeState says whether a deployment may still be refused by a freeze:
-- only a pending one that no one overrode.
SELECT status, freeze_override_by FROM deployments WHERE id = @id;
