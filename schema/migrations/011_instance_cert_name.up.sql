-- An instance id is bound to the certificate that registered it: cert_name is the
-- name of the caller's identity (spiffe://mantis/thorax/<cert_name>) when it
-- registered. Every later call naming the id must come from a certificate of that
-- name, so one Thorax (or a stolen agent key) cannot heartbeat, claim, report or
-- release as another. NULL is an instance registered on a plaintext development
-- link (grpc.insecure), which has no identities to bind.
ALTER TABLE thorax_instances ADD COLUMN cert_name text CHECK (cert_name <> '');
