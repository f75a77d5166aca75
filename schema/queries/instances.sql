-- Thorax instances: registration, heartbeats, identity and death
-- (schema/instances.go, schema/instance_death.go, schema/instance_identity.go).

-- name: RegisterInstance :exec
-- RegisterInstance records a starting Thorax instance, with the certificate that
-- registers it (NULL without identities) and that certificate's scope (NULL patterns:
-- unrestricted).
INSERT INTO thorax_instances (id, name, version, cert_name, scope_patterns, scope_labels)
VALUES (@id::uuid, @name::text, @version::text, sqlc.narg(cert_name)::text,
        sqlc.narg(scope_patterns)::text[], sqlc.narg(scope_labels)::jsonb);

-- name: RecordInstanceHeartbeat :execrows
-- RecordInstanceHeartbeat keeps an instance that is not dead live or draining, noting
-- the replica that received the heartbeat.
UPDATE thorax_instances SET last_heartbeat_at = now(), status = @status::text, heartbeat_replica = nullif(@replica::text, '')
WHERE id = @id::uuid AND status <> 'dead';

-- name: RecordPollTargets :exec
-- RecordPollTargets registers unknown poll-mode targets and moves known ones to the
-- instance, those its scope lets it serve.
INSERT INTO targets (name, mode, assigned_instance_id)
SELECT n, 'poll', @instance_id::uuid
FROM unnest(@names::text[]) AS n, thorax_instances i
WHERE i.id = @instance_id::uuid
  AND thorax_may_serve(i.scope_patterns, i.scope_labels, n, (SELECT labels FROM targets WHERE name = n))
ON CONFLICT (name) DO UPDATE SET assigned_instance_id = @instance_id::uuid, updated_at = now()
WHERE targets.mode = 'poll' AND targets.deregistered_at IS NULL
  AND targets.assigned_instance_id IS DISTINCT FROM @instance_id::uuid;

-- name: ListenTargetsOf :many
-- ListenTargetsOf lists the registered listen-mode targets assigned to an instance.
SELECT name FROM targets
WHERE assigned_instance_id = @instance_id::uuid AND mode = 'listen' AND deregistered_at IS NULL
ORDER BY name;

-- name: RecentlyCancelledCommandsOf :many
-- RecentlyCancelledCommandsOf lists commands an instance holds that were cancelled in
-- the last ten minutes.
SELECT id FROM command_queue
WHERE holder_instance_id = @instance_id::uuid AND status = 'cancelled' AND finished_at > now() - interval '10 minutes';

-- name: MarkOneInstanceDead :one
-- MarkOneInstanceDead marks the longest-silent instance dead once it has been silent
-- past timeout, unless the replica it heartbeats through spares it: a replica neither
-- gone (silent past gone_after) nor fresh and healthy for a whole timeout.
UPDATE thorax_instances SET status = 'dead', died_at = now()
WHERE id = (SELECT i.id FROM thorax_instances i
            LEFT JOIN mandible_replicas r ON r.id = i.heartbeat_replica
            WHERE i.status <> 'dead' AND i.last_heartbeat_at < now() - @timeout::interval
              AND NOT coalesce(r.ended_at IS NULL AND r.last_seen_at >= now() - @gone_after::interval
                               AND NOT (r.stopped_at IS NULL AND r.last_seen_at >= now() - @timeout::interval
                                        AND r.healthy_since <= now() - @timeout::interval), false)
            ORDER BY i.last_heartbeat_at LIMIT 1 FOR UPDATE OF i SKIP LOCKED)
RETURNING id, name;

-- name: LockListenTargetsOf :many
-- LockListenTargetsOf locks and lists the listen-mode targets assigned to an instance.
SELECT id, name FROM targets WHERE assigned_instance_id = @instance_id::uuid AND mode = 'listen' ORDER BY name FOR UPDATE;

-- name: ReassignListenTarget :one
-- ReassignListenTarget gives a target to the live instance with the fewest targets
-- among those whose scope lets them serve it, or to none when no such instance
-- heartbeat within timeout.
UPDATE targets SET assigned_instance_id = (
    SELECT i.id FROM thorax_instances i
    LEFT JOIN targets o ON o.assigned_instance_id = i.id AND o.deregistered_at IS NULL
    WHERE i.status = 'live' AND i.last_heartbeat_at > now() - @timeout::interval
      AND thorax_may_serve(i.scope_patterns, i.scope_labels, targets.name, targets.labels)
    GROUP BY i.id ORDER BY count(o.id), i.id LIMIT 1),
    updated_at = now()
WHERE id = @target_id::uuid
RETURNING assigned_instance_id;

-- name: UnassignPollTargets :exec
-- UnassignPollTargets frees the poll-mode targets of an instance.
UPDATE targets SET assigned_instance_id = NULL, updated_at = now()
WHERE assigned_instance_id = @instance_id::uuid AND mode = 'poll';

-- name: LoseCommandsOf :many
-- LoseCommandsOf marks the commands running on an instance lost and fails their
-- dispatch requests, for reason.
WITH lost AS (
    UPDATE command_queue SET status = 'lost', finished_at = now(), error = @reason::text
    WHERE holder_instance_id = @instance_id::uuid AND status = 'running'
    RETURNING id, dispatch_request_id, deployment_id
), failed_requests AS (
    UPDATE pending_dispatch_requests p SET status = 'failed', finished_at = now(), last_error = @reason::text
    FROM lost WHERE p.id = lost.dispatch_request_id AND p.status = 'dispatched'
)
SELECT id, deployment_id FROM lost;

-- name: FailUnfinishedDeployment :execrows
-- FailUnfinishedDeployment fails a deployment that is pending or running.
UPDATE deployments SET status = 'failed', finished_at = now(), error = @reason::text
WHERE id = @id::uuid AND status IN ('pending', 'running');

-- name: InstanceCertificate :one
-- InstanceCertificate reads the certificate name bound to an instance.
SELECT cert_name FROM thorax_instances WHERE id = @id::uuid;

-- name: InstanceMayReport :one
-- InstanceMayReport says whether the instance may store a result of the command for
-- the named target as far as its scope goes: it holds the command, or its scope lets
-- it serve the target (false for an unknown instance).
SELECT coalesce((
    SELECT (SELECT c.holder_instance_id FROM command_queue c WHERE c.id = @command_id::uuid) IS NOT DISTINCT FROM i.id
        OR thorax_may_serve(i.scope_patterns, i.scope_labels, @target::text,
                            (SELECT labels FROM targets WHERE name = @target::text))
    FROM thorax_instances i WHERE i.id = @instance_id::uuid), false)::bool AS may_report;
