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
-- ClaimCandidates is the first statement of a claim round. It locks (SKIP LOCKED, so
-- replicas load different rows) up to max_rows claimable requests, priority first,
-- then age, leaving out those of a target whose own limit is reached, of a label
-- limit that is reached, and of the targets and label limits the claim already found
-- full (skip_targets, skip_limits). The targets at their limit are found once, from
-- what runs (a few rows per busy target), so that each pending row costs a hash
-- lookup, not a count; the lock is taken on the scan of the queue alone, so only the
-- rows returned are locked. Each row comes with the limits it falls under (its
-- target's, its own or else the default, and the label limits its target's labels
-- match, by name). The statement then takes the advisory lock of every limit key the
-- rows fall under (a stripe of 256 of the target ids, and each label limit by name),
-- in ascending order: waiting for each when wait is set, else only those free now;
-- held says whether every key of the row is held. The counts that decide admission
-- are read by the next statement, whose snapshot follows the locks.
WITH target_default AS (
    SELECT d.name, d.max_running FROM concurrency_limits d WHERE d.scope = 'target' AND d.value IS NULL
), label_limits AS (
    SELECT l.name, l.label, l.value, l.max_running FROM concurrency_limits l WHERE l.scope = 'label'
), full_labels AS (
    SELECT f.label, f.value FROM label_limits f
    WHERE f.name = ANY(@skip_limits::text[]) OR label_running(f.label, f.value, f.max_running) >= f.max_running
), active AS (
    SELECT a.target_id FROM pending_dispatch_requests a WHERE a.status = 'processing'
    UNION ALL
    SELECT c.target_id FROM command_queue c WHERE c.status IN ('queued', 'running')
), busy AS (
    SELECT a.target_id FROM (SELECT ac.target_id, count(*) AS running FROM active ac GROUP BY ac.target_id) a
    JOIN targets bt ON bt.id = a.target_id
    LEFT JOIN concurrency_limits own ON own.scope = 'target' AND own.value = bt.name
    WHERE a.running >= coalesce(own.max_running, (SELECT d.max_running FROM target_default d), 1)
), locked AS MATERIALIZED (
    SELECT p.id, p.target_id, p.priority_rank, p.created_at
    FROM pending_dispatch_requests p
    WHERE p.status = 'pending' AND p.next_attempt_at <= now() AND p.expires_at > now()
      AND p.target_id <> ALL(@skip_targets::uuid[])
      AND p.target_id NOT IN (SELECT b.target_id FROM busy b)
      AND NOT EXISTS (SELECT 1 FROM targets ft JOIN full_labels f ON ft.labels ->> f.label = f.value WHERE ft.id = p.target_id)
    ORDER BY p.priority_rank, p.created_at
    LIMIT @max_rows::int
    FOR UPDATE OF p SKIP LOCKED
), candidates AS (
    SELECT l.id, l.target_id, l.priority_rank, l.created_at,
           coalesce(own.name, d.name, '')::text AS target_limit,
           coalesce(own.max_running, d.max_running, 1)::int AS target_max,
           ARRAY(SELECT ll.name FROM label_limits ll WHERE t.labels ->> ll.label = ll.value ORDER BY ll.name)::text[] AS label_limits
    FROM locked l
    JOIN targets t ON t.id = l.target_id
    LEFT JOIN concurrency_limits own ON own.scope = 'target' AND own.value = t.name
    LEFT JOIN target_default d ON true
), keyed AS (
    SELECT c.id, hashtextextended('mantis/limit/target/' || ('x' || right(c.target_id::text, 2))::bit(8)::int, 0) AS key
    FROM candidates c
    UNION ALL
    SELECT c.id, hashtextextended('mantis/limit/label/' || n, 0) FROM candidates c, unnest(c.label_limits) AS n
), held AS MATERIALIZED (
    SELECT k.key, CASE WHEN @wait::bool THEN pg_advisory_xact_lock(k.key) IS NOT NULL ELSE pg_try_advisory_xact_lock(k.key) END AS held
    FROM (SELECT DISTINCT kk.key FROM keyed kk ORDER BY kk.key) k
)
SELECT c.id, c.target_id, c.target_limit, c.target_max, c.label_limits,
       NOT EXISTS (SELECT 1 FROM keyed kk JOIN held h ON h.key = kk.key WHERE kk.id = c.id AND NOT h.held) AS held
FROM candidates c
ORDER BY c.priority_rank, c.created_at;

-- name: ClaimWithinTargetRoom :many
-- ClaimWithinTargetRoom is the second and last statement of a claim round whose rows
-- fall under no label limit: in a snapshot taken after ClaimCandidates' locks, it
-- counts what runs on each target of the rows (what target_running counts) and
-- claims, in the order given, the first rows of each target that fit (the seed's
-- conditional UPDATE from pending to processing, with a new claim epoch). Each row
-- comes back, in order, with whether it fitted (admitted) and whether the update won
-- it (claimed). The rows to update are given as an array so that even a generic plan
-- finds them by primary key rather than by joining the whole queue.
WITH c AS (
    SELECT unnest(@ids::uuid[]) AS id, unnest(@target_ids::uuid[]) AS target_id, unnest(@caps::int[]) AS cap,
           generate_subscripts(@ids::uuid[], 1) AS ord
), running AS (
    -- What target_running counts, for all the targets in one pass: the claim keeps
    -- each target within its cap, so stopping at the cap would save little, and one
    -- scan visits each page once where a count per target revisits them.
    SELECT x.target_id, count(*) AS running FROM (
        SELECT a.target_id FROM pending_dispatch_requests a WHERE a.status = 'processing' AND a.target_id = ANY(@target_ids::uuid[])
        UNION ALL
        SELECT q.target_id FROM command_queue q WHERE q.status IN ('queued', 'running') AND q.target_id = ANY(@target_ids::uuid[])
    ) x GROUP BY x.target_id
), room AS (
    SELECT d.target_id, d.cap - coalesce(r.running, 0) AS room
    FROM (SELECT DISTINCT c.target_id, c.cap FROM c) d
    LEFT JOIN running r ON r.target_id = d.target_id
), ranked AS (
    SELECT c.id, c.ord, row_number() OVER (PARTITION BY c.target_id ORDER BY c.ord) <= r.room AS admitted
    FROM c JOIN room r ON r.target_id = c.target_id
), claimed AS (
    UPDATE pending_dispatch_requests p
    SET status = 'processing', claimed_by = @replica::text, claimed_at = now(), claim_epoch = p.claim_epoch + 1,
        claim_key = nullif(@claim_key::text, '')
    WHERE p.id = ANY(ARRAY(SELECT a.id FROM ranked a WHERE a.admitted)) AND p.status = 'pending'
    RETURNING p.id, p.claim_epoch, p.target_id, p.priority, p.attempts, p.created_at
)
SELECT a.id::uuid AS id, a.admitted::bool AS admitted, (cl.id IS NOT NULL)::bool AS claimed,
       coalesce(cl.claim_epoch, 0)::bigint AS claim_epoch, coalesce(t.name, '')::text AS target,
       coalesce(cl.priority, '')::text AS priority, coalesce(cl.attempts, 0)::int AS attempts,
       coalesce(cl.created_at, now())::timestamptz AS created_at
FROM ranked a
LEFT JOIN claimed cl ON cl.id = a.id
LEFT JOIN targets t ON t.id = cl.target_id
ORDER BY a.ord;

-- name: LimitsRunning :many
-- LimitsRunning counts, in one statement, what runs on each target of ids (up to its
-- cap, side by side) and under each named label limit (up to its maximum): the
-- counts of a claim round whose rows fall under label limits.
SELECT 'target'::text AS scope, u.id::text AS subject, target_running(u.id, u.cap)::int AS running, u.cap::int AS max_running
FROM (SELECT unnest(@ids::uuid[]) AS id, unnest(@caps::int[]) AS cap) u
UNION ALL
SELECT 'label'::text, l.name, label_running(l.label, l.value, l.max_running)::int, l.max_running
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
