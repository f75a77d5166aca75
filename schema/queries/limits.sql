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

-- name: LockClaims :exec
-- LockClaims serialises the claims of every replica until the transaction ends: the
-- statements after it take their snapshots once every claim before this one has
-- committed, so what they count as running includes what those claims took. It also
-- turns bitmap scans off for the rest of the claim's transaction: a queue's
-- statistics are always behind its contents (it fills and drains between two
-- analyses), and on a queue of thousands the planner, believing it holds a few rows,
-- would read every pending row through a bitmap and sort them all to take a batch,
-- where the claimable index gives them in order and the scan stops at the batch.
SELECT pg_advisory_xact_lock(hashtextextended('mantis/limit/claims', 0)), set_config('enable_bitmapscan', 'off', true);

-- name: ClaimWithinTargetLimits :many
-- ClaimWithinTargetLimits is a claim round when no label limit exists, in one
-- statement, after LockClaims. It locks (SKIP LOCKED) up to max_rows claimable
-- requests, priority first, then age, leaving out the targets at their limit and
-- those the claim already found full (skip_targets), admits each target's first rows
-- as far as its limit has room, and moves them to processing (the seed's conditional
-- UPDATE from pending to processing, with a new claim epoch). Each row comes back, in
-- claim order, with whether it fitted (admitted) and whether the update won it
-- (claimed). When a label limit exists the statement claims nothing and returns one
-- row with label_limited set: the claim then takes the label path (ClaimCandidates).
--
-- What runs is counted (one pass over what runs, for every target) unless every
-- target has a bound (target_claim_bounds) that leaves room for a whole batch under
-- its limit: then every candidate fits, and nothing is counted. The statement keeps
-- the bounds: when it counted, a target gets what runs plus what it admitted where
-- that leaves room for a batch, or where it had a bound and took rows; when it did
-- not count, a target it took rows on gets its bound plus what it took.
WITH label_limited AS (
    SELECT EXISTS (SELECT 1 FROM concurrency_limits l WHERE l.scope = 'label') AS yes
), default_max AS (
    SELECT coalesce((SELECT d.max_running FROM concurrency_limits d WHERE d.scope = 'target' AND d.value IS NULL), 1) AS max_running
), caps AS MATERIALIZED (
    SELECT t.id AS target_id, coalesce(own.max_running, (SELECT m.max_running FROM default_max m)) AS cap
    FROM targets t
    LEFT JOIN concurrency_limits own ON own.scope = 'target' AND own.value = t.name
), roomy AS (
    -- Whether any target's limit can leave room for a batch at all: with a limit of
    -- one everywhere, no target can hold a bound and the claim counts without looking.
    SELECT (SELECT m.max_running FROM default_max m) >= @max_rows::int
        OR EXISTS (SELECT 1 FROM concurrency_limits o WHERE o.scope = 'target' AND o.max_running >= @max_rows::int) AS yes
), counted AS (
    -- Whether to count; never when a label limit exists: that round claims nothing.
    SELECT NOT (SELECT lf.yes FROM label_limited lf) AND (NOT (SELECT ry.yes FROM roomy ry) OR EXISTS (
        SELECT 1 FROM caps c LEFT JOIN target_claim_bounds b ON b.target_id = c.target_id
        WHERE b.target_id IS NULL OR b.claimed + @max_rows::int > c.cap
    )) AS yes
), running AS (
    -- What target_running counts, for every target in one pass; only when some
    -- target has no bound leaving room for a batch.
    SELECT x.target_id, count(*) AS running FROM (
        SELECT a.target_id FROM pending_dispatch_requests a WHERE a.status = 'processing'
        UNION ALL
        SELECT q.target_id FROM command_queue q WHERE q.status IN ('queued', 'running')
    ) x
    WHERE (SELECT cn.yes FROM counted cn)
    GROUP BY x.target_id
), room AS (
    SELECT r.target_id, coalesce(own.max_running, (SELECT m.max_running FROM default_max m)) - r.running AS room
    FROM running r
    JOIN targets rt ON rt.id = r.target_id
    LEFT JOIN concurrency_limits own ON own.scope = 'target' AND own.value = rt.name
), locked AS MATERIALIZED (
    -- The rows stay locked until the commit, so what they hold now is what the update
    -- below changes: the claim's answer is read here, not from the update's rows. The
    -- lock also keeps each row where it is, so the update finds it by its address
    -- (row_at).
    SELECT p.id, p.ctid AS row_at, p.target_id, p.priority_rank, p.created_at, p.claim_epoch, p.priority, p.attempts
    FROM pending_dispatch_requests p
    -- The expiry test is written so that no index can serve it (IS TRUE): the index of
    -- live rows by expiry would read every pending row, out of order.
    WHERE p.status = 'pending' AND p.next_attempt_at <= now() AND (p.expires_at > now()) IS TRUE
      AND NOT (SELECT lf.yes FROM label_limited lf)
      AND p.target_id <> ALL(@skip_targets::uuid[])
      AND p.target_id NOT IN (SELECT f.target_id FROM room f WHERE f.room <= 0)
    ORDER BY p.priority_rank, p.created_at
    LIMIT @max_rows::int
    FOR UPDATE OF p SKIP LOCKED
), ranked AS MATERIALIZED (
    SELECT l.id, l.row_at, l.target_id, t.name AS target, l.claim_epoch, l.priority, l.attempts, l.created_at,
           row_number() OVER (ORDER BY l.priority_rank, l.created_at) AS ord,
           row_number() OVER (PARTITION BY l.target_id ORDER BY l.priority_rank, l.created_at)
               <= coalesce(r.room, own.max_running, (SELECT m.max_running FROM default_max m)) AS admitted
    FROM locked l
    JOIN targets t ON t.id = l.target_id
    LEFT JOIN concurrency_limits own ON own.scope = 'target' AND own.value = t.name
    LEFT JOIN room r ON r.target_id = l.target_id
), claimed AS (
    UPDATE pending_dispatch_requests p
    SET status = 'processing', claimed_by = @replica::text, claimed_at = now(), claim_epoch = p.claim_epoch + 1,
        claim_key = nullif(@claim_key::text, '')
    -- By address (a TID scan): neither a probe of the primary key nor a test of each
    -- pending row against the whole list. Only a row still pending is taken (the
    -- conditional update), tested so that no index serves it (IS TRUE): a plain test
    -- would let the planner scan the index of pending rows instead, testing each
    -- against the list.
    WHERE p.ctid = ANY(ARRAY(SELECT a.row_at FROM ranked a WHERE a.admitted)) AND (p.status = 'pending') IS TRUE
    RETURNING p.id
), admitted_per_target AS (
    SELECT a.target_id, count(*) AS n FROM ranked a WHERE a.admitted GROUP BY a.target_id
), bounds AS (
    -- A counting claim writes what it counted plus what it took, where that leaves
    -- room for a batch (and differs from the bound); a claim that took rows on a
    -- target with a bound raises it, so that it stays at or above what runs.
    INSERT INTO target_claim_bounds AS tb (target_id, claimed)
    SELECT c.target_id, coalesce(r.running, 0) + coalesce(ap.n, 0)
    FROM caps c
    LEFT JOIN target_claim_bounds b ON b.target_id = c.target_id
    LEFT JOIN running r ON r.target_id = c.target_id
    LEFT JOIN admitted_per_target ap ON ap.target_id = c.target_id
    WHERE (SELECT ry.yes FROM roomy ry) AND (SELECT cn.yes FROM counted cn) AND c.cap >= @max_rows::int
      AND coalesce(r.running, 0) + coalesce(ap.n, 0) + @max_rows::int <= c.cap
      AND b.claimed IS DISTINCT FROM coalesce(r.running, 0) + coalesce(ap.n, 0)
    UNION
    SELECT ap.target_id, CASE WHEN (SELECT cn.yes FROM counted cn) THEN coalesce(r.running, 0) + ap.n ELSE b.claimed + ap.n END
    FROM admitted_per_target ap
    JOIN target_claim_bounds b ON b.target_id = ap.target_id
    LEFT JOIN running r ON r.target_id = ap.target_id
    ON CONFLICT (target_id) DO UPDATE SET claimed = excluded.claimed
    RETURNING tb.target_id
)
SELECT o.id::uuid AS id, o.target_id::uuid AS target_id, o.target::text AS target, o.admitted::bool AS admitted,
       o.claimed::bool AS claimed, o.claim_epoch::bigint AS claim_epoch, o.priority::text AS priority,
       o.attempts::int AS attempts, o.created_at::timestamptz AS created_at, o.label_limited::bool AS label_limited
FROM (
    -- Whether the update won a row is a membership test (a hashed subplan), never a
    -- join of the two CTEs: their row estimates are guesses on a queue that went from
    -- empty to thousands of rows since its statistics, and a nested loop over them is
    -- quadratic in the batch.
    SELECT a.ord, a.id, a.target_id, a.target, a.admitted, a.id IN (SELECT cl.id FROM claimed cl) AS claimed,
           a.claim_epoch + 1 AS claim_epoch, a.priority, a.attempts, a.created_at, false AS label_limited
    FROM ranked a
    UNION ALL
    SELECT 0, '00000000-0000-0000-0000-000000000000'::uuid, '00000000-0000-0000-0000-000000000000'::uuid, '', false, false,
           0, '', 0, now(), true
    WHERE (SELECT lf.yes FROM label_limited lf)
) o
ORDER BY o.ord;

-- name: ClaimCandidates :many
-- ClaimCandidates loads the candidates of a claim round when label limits exist,
-- after LockClaims. It locks (SKIP LOCKED) up to max_rows claimable requests,
-- priority first, then age, leaving out those of a target whose own limit is
-- reached, of a label limit that is reached, and of the targets and label limits the
-- claim already found full (skip_targets, skip_limits). The targets at their limit
-- are found once, from what runs (a few rows per busy target), so that each pending
-- row costs a hash lookup, not a count; the lock is taken on the scan of the queue
-- alone, so only the rows returned are locked. Each row comes with the limits it
-- falls under (its target's, its own or else the default, and the label limits its
-- target's labels match, by name).
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
    -- As in ClaimWithinTargetLimits, no index serves the expiry test (IS TRUE).
    WHERE p.status = 'pending' AND p.next_attempt_at <= now() AND (p.expires_at > now()) IS TRUE
      AND p.target_id <> ALL(@skip_targets::uuid[])
      AND p.target_id NOT IN (SELECT b.target_id FROM busy b)
      AND NOT EXISTS (SELECT 1 FROM targets ft JOIN full_labels f ON ft.labels ->> f.label = f.value WHERE ft.id = p.target_id)
    ORDER BY p.priority_rank, p.created_at
    LIMIT @max_rows::int
    FOR UPDATE OF p SKIP LOCKED
)
SELECT l.id, l.target_id,
       coalesce(own.name, d.name, '')::text AS target_limit,
       coalesce(own.max_running, d.max_running, 1)::int AS target_max,
       ARRAY(SELECT ll.name FROM label_limits ll WHERE t.labels ->> ll.label = ll.value ORDER BY ll.name)::text[] AS label_limits
FROM locked l
JOIN targets t ON t.id = l.target_id
LEFT JOIN concurrency_limits own ON own.scope = 'target' AND own.value = t.name
LEFT JOIN target_default d ON true
ORDER BY l.priority_rank, l.created_at;

-- name: LimitsRunning :many
-- LimitsRunning counts, in one statement, what runs on each target of ids (up to its
-- cap, side by side) and under each named label limit (up to its maximum): the
-- counts of a claim round whose rows fall under label limits, after LockClaims.
SELECT 'target'::text AS scope, u.id::text AS subject, target_running(u.id, u.cap)::int AS running, u.cap::int AS max_running
FROM (SELECT unnest(@ids::uuid[]) AS id, unnest(@caps::int[]) AS cap) u
UNION ALL
SELECT 'label'::text, l.name, label_running(l.label, l.value, l.max_running)::int, l.max_running
FROM concurrency_limits l WHERE l.scope = 'label' AND l.name = ANY(@names::text[]);

-- name: ClaimRequests :many
-- ClaimRequests is the seed's conditional UPDATE from pending to processing of the
-- admitted rows (which the claim holds locked), with a new claim epoch. It drops the
-- bounds (target_claim_bounds) of the targets it claimed on: this path does not keep
-- them, and a target without a bound is counted.
WITH claimed AS (
    UPDATE pending_dispatch_requests p
    SET status = 'processing', claimed_by = @replica::text, claimed_at = now(), claim_epoch = p.claim_epoch + 1,
        claim_key = nullif(@claim_key::text, '')
    -- The ids come through a subquery, whose array the planner takes for a few rows,
    -- and the test of status is one no index serves (IS TRUE): so the rows are found
    -- by primary key, never by reading every pending row and testing it against the
    -- list.
    WHERE p.id = ANY(ARRAY(SELECT unnest(@ids::uuid[]))) AND (p.status = 'pending') IS TRUE
    RETURNING p.id, p.claim_epoch, p.target_id, p.priority, p.attempts, p.created_at
), unbound AS (
    DELETE FROM target_claim_bounds b WHERE b.target_id IN (SELECT c.target_id FROM claimed c)
    RETURNING b.target_id
)
SELECT c.id, c.claim_epoch, t.name AS target, c.priority, c.attempts, c.created_at
FROM claimed c
JOIN targets t ON t.id = c.target_id;
