-- Concurrency limits: the limits themselves (schema/limits.go) and what the claim
-- reads and locks to keep to them (schema/claim_limits.go).

-- name: UpsertLimit :one
-- UpsertLimit stores a limit by name, replacing what the name held.
INSERT INTO concurrency_limits (name, scope, label, value, max_running, created_by)
VALUES (@name::text, @scope::text, sqlc.narg(label)::text, sqlc.narg(value)::text, @max_running::int, @created_by::text)
ON CONFLICT (name) DO UPDATE
SET scope = excluded.scope, label = excluded.label, value = excluded.value, max_running = excluded.max_running,
    created_by = excluded.created_by, updated_at = now()
RETURNING name, scope, label, value, max_running, created_by, created_at, updated_at;

-- name: LimitByName :one
-- LimitByName reads one limit.
SELECT name, scope, label, value, max_running, created_by, created_at, updated_at
FROM concurrency_limits WHERE name = @name::text;

-- name: ListLimits :many
-- ListLimits returns every limit by name.
SELECT name, scope, label, value, max_running, created_by, created_at, updated_at
FROM concurrency_limits ORDER BY name;

-- name: DeleteLimit :execrows
-- DeleteLimit removes a limit.
DELETE FROM concurrency_limits WHERE name = @name::text;

-- name: WakeDispatchers :exec
-- WakeDispatchers wakes every replica's dispatcher when the transaction commits: a
-- limit raised or removed may free held requests.
SELECT pg_notify('mantis_dispatch_requests', '');

-- name: ClaimCandidates :many
-- ClaimCandidates locks (SKIP LOCKED, so replicas load different rows) up to max_rows
-- claimable requests, priority first, then age, leaving out those of a target whose
-- own limit is reached, of a label limit that is reached, and of the targets and
-- label limits the claim already found full (skip_targets, skip_limits). Each row
-- comes with the limits it falls under: its target's (its own, else the default) and
-- the label limits its target's labels match, by name. The targets at their limit are
-- found once, from what runs (a few rows per busy target), so that each pending row
-- costs a hash lookup, not a count.
WITH label_limits AS (
    SELECT l.name, l.label, l.value, l.max_running FROM concurrency_limits l WHERE l.scope = 'label'
), full_labels AS (
    SELECT f.label, f.value FROM label_limits f
    WHERE f.name = ANY(@skip_limits::text[]) OR label_running(f.label, f.value, f.max_running) >= f.max_running
), active AS (
    SELECT a.target_id FROM pending_dispatch_requests a WHERE a.status = 'processing'
    UNION ALL
    SELECT c.target_id FROM command_queue c WHERE c.status IN ('queued', 'running')
), busy AS (
    SELECT a.target_id FROM active a JOIN targets bt ON bt.id = a.target_id
    GROUP BY a.target_id, bt.name
    HAVING count(*) >= coalesce((SELECT c.max_running FROM concurrency_limits c
                                 WHERE c.scope = 'target' AND (c.value = bt.name OR c.value IS NULL)
                                 ORDER BY c.value IS NULL LIMIT 1), 1)
)
SELECT p.id, p.target_id,
       coalesce((SELECT c.name FROM concurrency_limits c WHERE c.scope = 'target' AND (c.value = t.name OR c.value IS NULL)
                 ORDER BY c.value IS NULL LIMIT 1), '')::text AS target_limit,
       coalesce((SELECT c.max_running FROM concurrency_limits c WHERE c.scope = 'target' AND (c.value = t.name OR c.value IS NULL)
                 ORDER BY c.value IS NULL LIMIT 1), 0)::int AS target_max,
       ARRAY(SELECT l.name FROM label_limits l WHERE t.labels ->> l.label = l.value ORDER BY l.name)::text[] AS label_limits
FROM pending_dispatch_requests p
JOIN targets t ON t.id = p.target_id
WHERE p.status = 'pending' AND p.next_attempt_at <= now() AND p.expires_at > now()
  AND p.target_id <> ALL(@skip_targets::uuid[])
  AND p.target_id NOT IN (SELECT b.target_id FROM busy b)
  AND NOT EXISTS (SELECT 1 FROM full_labels f WHERE t.labels ->> f.label = f.value)
ORDER BY p.priority_rank, p.created_at
LIMIT @max_rows::int
FOR UPDATE OF p SKIP LOCKED;

-- name: LockLimitKeys :exec
-- LockLimitKeys takes the transaction's locks on keys, waiting for each, in the order
-- given (ascending, so that two claims never wait on each other in a cycle).
SELECT pg_advisory_xact_lock(k) FROM unnest(@keys::bigint[]) AS k;

-- name: TryLockLimitKeys :many
-- TryLockLimitKeys takes the transaction's locks on the keys free now and says which.
SELECT k::bigint AS key, pg_try_advisory_xact_lock(k)::bool AS locked FROM unnest(@keys::bigint[]) AS k;

-- name: TargetsRunning :many
-- TargetsRunning counts what runs on each target of ids, up to its cap (side by side).
SELECT u.id::uuid AS id, target_running(u.id, u.cap)::int AS running
FROM (SELECT unnest(@ids::uuid[]) AS id, unnest(@caps::int[]) AS cap) u;

-- name: LabelLimitsRunning :many
-- LabelLimitsRunning counts what runs under each named label limit, up to its maximum.
SELECT l.name, l.max_running, label_running(l.label, l.value, l.max_running)::int AS running
FROM concurrency_limits l WHERE l.scope = 'label' AND l.name = ANY(@names::text[]);

-- name: ClaimRequests :many
-- ClaimRequests is the seed's conditional UPDATE from pending to processing of the
-- admitted rows (which the claim holds locked), with a new claim epoch.
UPDATE pending_dispatch_requests p
SET status = 'processing', claimed_by = @replica::text, claimed_at = now(), claim_epoch = p.claim_epoch + 1,
    claim_key = nullif(@claim_key::text, '')
FROM targets t
WHERE p.id = ANY(@ids::uuid[]) AND p.status = 'pending' AND t.id = p.target_id
RETURNING p.id, p.claim_epoch, t.name AS target, p.priority, p.attempts, p.created_at;
