-- Mandible replicas' liveness (schema/replicas.go).

-- name: RecordReplicaHeartbeat :exec
-- RecordReplicaHeartbeat keeps a replica's row current; recovered, or a replica that was
-- stopped or ended, moves healthy_since to now.
INSERT INTO mandible_replicas (id) VALUES (@id::text)
ON CONFLICT (id) DO UPDATE SET
    last_seen_at = now(),
    healthy_since = CASE WHEN @recovered::bool OR mandible_replicas.stopped_at IS NOT NULL OR mandible_replicas.ended_at IS NOT NULL
                         THEN now() ELSE mandible_replicas.healthy_since END,
    started_at = CASE WHEN mandible_replicas.stopped_at IS NOT NULL OR mandible_replicas.ended_at IS NOT NULL
                      THEN now() ELSE mandible_replicas.started_at END,
    stopped_at = NULL, ended_at = NULL, ended_by = NULL, end_reason = NULL;

-- name: MarkReplicaStopped :exec
-- MarkReplicaStopped records that a replica stopped cleanly.
UPDATE mandible_replicas SET stopped_at = now() WHERE id = @id::text;

-- name: GoneReplicas :many
-- GoneReplicas lists replicas other than self silent for longer than gone_after and not
-- recorded as ended.
SELECT id, last_seen_at FROM mandible_replicas
WHERE id <> @self::text AND ended_at IS NULL AND last_seen_at < now() - @gone_after::interval
ORDER BY last_seen_at;

-- name: EndReplica :execrows
-- EndReplica records that a replica's dispatcher was ended, provided it is still silent
-- past gone_after.
UPDATE mandible_replicas SET ended_at = now(), ended_by = @ended_by::text, end_reason = @end_reason::text
WHERE id = @id::text AND ended_at IS NULL AND last_seen_at < now() - @gone_after::interval;
