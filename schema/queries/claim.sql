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
