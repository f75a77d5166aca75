-- Bounds on what runs per target, kept by the claim (schema/claim_limits.go) so that
-- it need not count what runs when no limit is near.
--
-- claimed is at least what runs on the target (target_running) whenever a claim
-- reads it: a claim writes it under the claims lock, either as what it counted plus
-- what it claimed, or as the last bound plus what it claimed, and only a claim adds
-- to what runs. A target without a row has no bound: the claim counts. The claim
-- keeps a row only while it leaves room for a whole batch under the target's limit.
CREATE TABLE target_claim_bounds (
    target_id uuid   PRIMARY KEY,
    claimed   bigint NOT NULL CHECK (claimed >= 0)
);
