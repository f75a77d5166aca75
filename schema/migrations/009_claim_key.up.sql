-- claim_key names the claim that took a row: the dispatcher workflow run and the claim
-- activity's id. A claim activity retried after its first attempt committed (the worker
-- died, the result was lost) finds the rows that attempt claimed and returns them,
-- instead of leaving them in processing until the 300 s orphan reclaim.

ALTER TABLE pending_dispatch_requests ADD COLUMN claim_key text CHECK (claim_key <> '');

CREATE INDEX pending_dispatch_requests_claim_key
    ON pending_dispatch_requests (claimed_by, claim_key)
    WHERE status = 'processing';
