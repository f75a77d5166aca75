-- Claim: a replica wins pending dispatch requests (schema/claim.go).

-- name: LockClaimKey :exec
-- LockClaimKey serialises the attempts of one claim key until the transaction ends.
SELECT pg_advisory_xact_lock(hashtextextended(@lock_key::text, 0));

-- name: HeldUnderKey :many
-- HeldUnderKey returns the rows replica holds in processing under claim_key, in claim
-- order.
SELECT p.id, p.claim_epoch, t.name AS target, p.priority, p.attempts, p.created_at
FROM pending_dispatch_requests p
JOIN targets t ON t.id = p.target_id
WHERE p.status = 'processing' AND p.claimed_by = @replica::text AND p.claim_key = @claim_key::text
ORDER BY p.priority_rank, p.created_at;

-- name: ClaimPending :many
-- ClaimPending is the seed's conditional UPDATE from pending to processing, in one
-- statement: SKIP LOCKED on the load keeps replicas off each other's rows, and only an
-- update that still sees pending wins. A candidate whose claimed columns are NULL was
-- lost to another replica between load and update.
WITH candidates AS (
    SELECT id, priority_rank, created_at
    FROM pending_dispatch_requests
    WHERE status = 'pending' AND next_attempt_at <= now() AND expires_at > now()
    ORDER BY priority_rank, created_at
    LIMIT @max_rows::int
    FOR UPDATE SKIP LOCKED
), claimed AS (
    UPDATE pending_dispatch_requests p
    SET status = 'processing', claimed_by = @replica::text, claimed_at = now(), claim_epoch = p.claim_epoch + 1,
        claim_key = nullif(@claim_key::text, '')
    FROM candidates c
    WHERE p.id = c.id AND p.status = 'pending'
    RETURNING p.id, p.claim_epoch, p.target_id, p.priority, p.attempts, p.created_at
)
SELECT c.id, cl.claim_epoch, t.name AS target, cl.priority, cl.attempts, cl.created_at
FROM candidates c
LEFT JOIN claimed cl ON cl.id = c.id
LEFT JOIN targets t ON t.id = cl.target_id
ORDER BY c.priority_rank, c.created_at;
