-- Commands: what Thorax instances claim, run, hand back and report
-- (schema/commands.go).

-- name: InstanceStatus :one
-- InstanceStatus reads a Thorax instance's state.
SELECT status FROM thorax_instances WHERE id = @id::uuid;

-- name: AssignPollTargets :exec
-- AssignPollTargets makes the named poll-mode targets the instance's own, those its
-- scope lets it serve.
UPDATE targets SET assigned_instance_id = @instance_id::uuid, updated_at = now()
FROM thorax_instances i
WHERE i.id = @instance_id::uuid AND targets.name = ANY(@names::text[]) AND targets.mode = 'poll'
  AND targets.assigned_instance_id IS DISTINCT FROM @instance_id::uuid
  AND thorax_may_serve(i.scope_patterns, i.scope_labels, targets.name, targets.labels);

-- name: ClaimCommands :many
-- ClaimCommands claims up to max_rows queued commands for the instance — of listen-mode
-- targets assigned to it and of the poll-mode targets it names, restricted to
-- command_ids when that is not empty — each at a new lease epoch, in claim order:
-- highest priority, then oldest; a poll target only when the instance's scope lets it
-- serve it. It takes only commands that keep what it has taken within
-- max_bytes (their text, env and working directory as stored, plus a little for the
-- other fields), so that the answer carrying them stays under the message size both
-- ends of the call accept; the first command is always taken. The rows it locked and
-- left stay queued.
WITH locked AS (
    SELECT c.id, c.priority_rank, c.created_at,
           octet_length(c.command) + octet_length(c.env::text) + coalesce(octet_length(c.working_dir), 0) + 512 AS size
    FROM command_queue c
    JOIN targets t ON t.id = c.target_id
    JOIN thorax_instances i ON i.id = @instance_id::uuid
    WHERE c.status = 'queued'
      AND ((t.mode = 'listen' AND t.assigned_instance_id = @instance_id::uuid)
           OR (t.mode = 'poll' AND t.name = ANY(@poll_targets::text[])
               AND thorax_may_serve(i.scope_patterns, i.scope_labels, t.name, t.labels)))
      AND (coalesce(cardinality(@command_ids::uuid[]), 0) = 0 OR c.id = ANY(@command_ids::uuid[]))
    ORDER BY c.priority_rank, c.created_at
    LIMIT @max_rows::int
    FOR UPDATE OF c SKIP LOCKED
), due AS (
    SELECT id FROM (
        SELECT id, size, sum(size) OVER (ORDER BY priority_rank, created_at, id ROWS UNBOUNDED PRECEDING) - size AS before
        FROM locked
    ) s
    WHERE before = 0 OR before + size <= @max_bytes::bigint
), claimed AS (
    UPDATE command_queue c
    SET status = 'running', holder_instance_id = @instance_id::uuid, lease_epoch = c.lease_epoch + 1, claimed_at = now()
    FROM due, targets t
    WHERE c.id = due.id AND t.id = c.target_id
    RETURNING c.id, c.dispatch_request_id, t.name AS target, t.mode, c.command, c.timeout, c.priority, c.lease_epoch,
              c.deployment_id, c.step_position, c.env, coalesce(c.working_dir, '')::text AS working_dir,
              coalesce(t.address, '')::text AS listen_address, c.max_retries, c.priority_rank, c.created_at,
              coalesce(c.trace_parent, '')::text AS trace_parent
)
SELECT id, dispatch_request_id, target, mode, command, timeout, priority, lease_epoch, deployment_id, step_position,
       env, working_dir, listen_address, max_retries, trace_parent
FROM claimed
ORDER BY priority_rank, created_at;

-- name: StoreCommandResult :one
-- StoreCommandResult records a running command's result at lease_epoch, the fencing
-- token, in one statement with its target event and, for a failure, its analysis
-- request. Only the instance holding the command stores it, or one forwarding a poll
-- command for its own target (target, an empty string for none). No row means nothing was stored.
WITH stored AS (
    UPDATE command_queue c
    SET status = @status::text, exit_code = @exit_code::int, output = @output::text,
        output_truncated = @output_truncated::bool, error = sqlc.narg(error)::text,
        started_at = sqlc.narg(started_at)::timestamptz, finished_at = sqlc.narg(finished_at)::timestamptz,
        output_raw = @output_raw::bytea, result_instance_id = @instance_id::uuid
    FROM targets t
    WHERE c.id = @command_id::uuid AND c.lease_epoch = @lease_epoch::bigint AND c.status = 'running' AND t.id = c.target_id
      AND (c.holder_instance_id = @instance_id::uuid OR (@target::text <> '' AND t.name = @target::text AND c.mode = 'poll'))
    RETURNING c.id, c.deployment_id, c.step_position, t.name
), event AS (
    INSERT INTO deployment_events (deployment_id, type, data)
    SELECT s.deployment_id, 'target.' || @status::text,
           jsonb_build_object('step_position', s.step_position, 'target', s.name, 'command_id', s.id,
                              'exit_code', @exit_code::int, 'output_tail', @output_tail::text,
                              'output_truncated', @output_truncated::bool)
           || CASE WHEN sqlc.narg(error)::text IS NULL THEN '{}'::jsonb
                   ELSE jsonb_build_object('error', sqlc.narg(error)::text) END
    FROM stored s WHERE s.deployment_id IS NOT NULL
), analysis AS (
    INSERT INTO analyses (command_id, source, input)
    SELECT s.id, 'internal', right(@analysis_input::text, @max_analysis_input::int) FROM stored s
    WHERE @status::text = 'failed'
    ON CONFLICT (command_id) DO NOTHING
)
SELECT deployment_id, step_position, name FROM stored;

-- name: CommandExists :one
-- CommandExists reports whether a command row exists.
SELECT EXISTS (SELECT 1 FROM command_queue WHERE id = @id::uuid);

-- name: ReleaseCommands :execrows
-- ReleaseCommands hands the commands the instance holds at the given epochs (ids and
-- epochs side by side) back to the queue unrun.
UPDATE command_queue c SET status = 'queued', holder_instance_id = NULL, claimed_at = NULL
FROM (SELECT unnest(@ids::uuid[]) AS id, unnest(@epochs::bigint[]) AS epoch) AS l
WHERE c.id = l.id AND c.lease_epoch = l.epoch AND c.holder_instance_id = @instance_id::uuid AND c.status = 'running';
