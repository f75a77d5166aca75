-- Live output of running commands and the retention of output and events
-- (schema/output.go, schema/retention.go).

-- name: OutputHolder :one
-- OutputHolder is the command's identity for its output chunks, when instance_id holds
-- it at lease_epoch: running, or ended within grace (the last chunks may trail the
-- result). No row: not held, or unknown.
SELECT c.dispatch_request_id, c.deployment_id, c.step_position, t.name AS target
FROM command_queue c JOIN targets t ON t.id = c.target_id
WHERE c.id = @command_id
  AND c.holder_instance_id = @instance_id::uuid
  AND c.lease_epoch = @lease_epoch
  AND c.status <> 'queued'
  AND (sqlc.narg(target)::text IS NULL OR t.name = sqlc.narg(target)::text)
  AND (c.finished_at IS NULL OR c.finished_at > now() - @grace::interval);

-- name: OutputCommandExists :one
SELECT EXISTS (SELECT 1 FROM command_queue WHERE id = @command_id);

-- name: LockOutputTotal :one
-- LockOutputTotal returns the bytes stored for the command so far and whether its bound
-- was reached, and locks its row until the transaction ends.
INSERT INTO command_output_totals (command_id) VALUES (@command_id)
ON CONFLICT (command_id) DO UPDATE SET updated_at = now()
RETURNING bytes, truncated;

-- name: SetOutputTotal :exec
UPDATE command_output_totals SET bytes = @bytes, truncated = @truncated, updated_at = now()
WHERE command_id = @command_id;

-- name: InsertOutputChunk :one
-- InsertOutputChunk stores a chunk once: a chunk sent again returns no row.
INSERT INTO command_output (command_id, seq, dispatch_request_id, deployment_id, step_position, target, data, truncated)
VALUES (@command_id, @seq, @dispatch_request_id, sqlc.narg(deployment_id), sqlc.narg(step_position), @target, @data, @truncated)
ON CONFLICT (command_id, seq) DO NOTHING
RETURNING id, created_at;

-- name: ReadDeploymentOutput :many
-- ReadDeploymentOutput reads a deployment's stored chunks with id > after, in id order,
-- at most max_rows: of target (NULL: any) and step (NULL: any).
SELECT id, command_id, seq, dispatch_request_id, step_position, target, data, truncated, created_at
FROM command_output
WHERE deployment_id = @deployment_id
  AND id > @after
  AND (sqlc.narg(target)::text IS NULL OR target = sqlc.narg(target)::text)
  AND (sqlc.narg(step)::integer IS NULL OR step_position = sqlc.narg(step)::integer)
ORDER BY id
LIMIT @max_rows;

-- name: PruneOutput :execrows
-- PruneOutput deletes at most max_rows chunks written before cutoff.
DELETE FROM command_output
WHERE id IN (SELECT o.id FROM command_output o WHERE o.created_at < @cutoff ORDER BY o.id LIMIT @max_rows);

-- name: PruneOutputTotals :execrows
DELETE FROM command_output_totals WHERE updated_at < @cutoff;

-- name: LastEventBefore :one
-- LastEventBefore is the highest event id written before cutoff, 0 for none.
SELECT coalesce(max(id), 0)::bigint FROM deployment_events WHERE created_at < @cutoff;

-- name: PruneEvents :execrows
-- PruneEvents deletes at most max_rows events with id <= through, oldest first.
DELETE FROM deployment_events
WHERE id IN (SELECT e.id FROM deployment_events e WHERE e.id <= @through ORDER BY e.id LIMIT @max_rows);

-- name: MarkEventsPruned :exec
-- MarkEventsPruned moves the retention watermark on to through; it never moves back.
UPDATE event_log_retention SET pruned_through = greatest(pruned_through, @through), pruned_at = now();

-- name: EventsPrunedThrough :one
-- EventsPrunedThrough is the highest event id retention deleted, 0 when none.
SELECT coalesce((SELECT pruned_through FROM event_log_retention), 0)::bigint;
