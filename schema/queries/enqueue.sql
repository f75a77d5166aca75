-- Enqueue: a batch of dispatch requests in one round trip (schema/enqueue.go).

-- name: ResolveTargets :many
-- ResolveTargets returns the id of each registered target among names.
SELECT name, id FROM targets WHERE name = ANY(@names::text[]) AND deregistered_at IS NULL;

-- name: InsertDispatchRequests :many
-- InsertDispatchRequests writes one request per array position, skipping the keys that
-- already name a request. The arrays cannot hold NULL: a zero deployment id and an empty
-- working directory stand for none, and a step position counts only with a deployment.
-- The insert's trigger notifies mantis_dispatch_requests once per statement. Every
-- request of the batch carries trace_parent, the trace context of the enqueue ('' none).
INSERT INTO pending_dispatch_requests
    (idempotency_key, target_id, deployment_id, step_position, command, timeout, priority, env, working_dir, expires_at,
     trace_parent)
SELECT r.k, r.t, nullif(r.d, '00000000-0000-0000-0000-000000000000'::uuid),
       CASE WHEN r.d <> '00000000-0000-0000-0000-000000000000'::uuid THEN r.s END,
       r.c, make_interval(secs => r.us / 1e6), r.p, r.e::jsonb, nullif(r.w, ''), now() + @ttl::interval,
       nullif(@trace_parent::text, '')
FROM (SELECT unnest(@keys::text[]) AS k, unnest(@target_ids::uuid[]) AS t, unnest(@deployment_ids::uuid[]) AS d,
             unnest(@step_positions::int[]) AS s, unnest(@commands::text[]) AS c, unnest(@timeouts_us::bigint[]) AS us,
             unnest(@priorities::text[]) AS p, unnest(@envs::text[]) AS e, unnest(@working_dirs::text[]) AS w) AS r
ON CONFLICT (idempotency_key) DO NOTHING
RETURNING idempotency_key, id, expires_at;

-- name: DispatchRequestsByKey :many
-- DispatchRequestsByKey reads the requests that keys already named.
SELECT idempotency_key, id, expires_at FROM pending_dispatch_requests WHERE idempotency_key = ANY(@keys::text[]);
