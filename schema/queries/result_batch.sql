-- Batched results (schema/result_batch.go): many results stored by one statement, in
-- one transaction, each fenced by its own lease epoch as StoreCommandResult fences one.

-- name: StoreCommandResults :many
-- StoreCommandResults records the results of running commands, given side by side in
-- arrays (one element per result), each at its lease epoch, with each one's target
-- event and, for a failure, its analysis request. The rows returned are the results
-- stored; a result without a row stored nothing (stale epoch, command not running).
-- A started_at or finished_at of 0001-01-01 00:00:00+00 (Go's zero time) is unknown.
-- The id = ANY(...) lets even a generic plan find the rows by primary key instead of
-- joining the whole table to the input. The update returns what the event and the
-- analysis request need from the input, so that neither joins the input again: the
-- planner, guessing one stored row, would scan the input once per stored row.
WITH input AS (
    SELECT unnest(@command_ids::uuid[]) AS command_id, unnest(@lease_epochs::bigint[]) AS lease_epoch,
           unnest(@statuses::text[]) AS status, unnest(@exit_codes::bigint[]) AS exit_code,
           unnest(@outputs::text[]) AS output, unnest(@outputs_truncated::bool[]) AS output_truncated,
           unnest(@errors::text[]) AS error, unnest(@started_at::timestamptz[]) AS started_at,
           unnest(@finished_at::timestamptz[]) AS finished_at, unnest(@outputs_raw::bytea[]) AS output_raw,
           unnest(@instance_ids::uuid[]) AS instance_id, unnest(@output_tails::text[]) AS output_tail,
           unnest(@analysis_inputs::text[]) AS analysis_input
), stored AS (
    UPDATE command_queue c
    SET status = u.status, exit_code = u.exit_code::int, output = u.output,
        output_truncated = u.output_truncated, error = NULLIF(u.error, ''),
        started_at = NULLIF(u.started_at, '0001-01-01 00:00:00+00'::timestamptz),
        finished_at = NULLIF(u.finished_at, '0001-01-01 00:00:00+00'::timestamptz),
        output_raw = u.output_raw, result_instance_id = u.instance_id
    FROM input u, targets t
    WHERE c.id = ANY(@command_ids::uuid[]) AND c.id = u.command_id AND c.lease_epoch = u.lease_epoch
      AND c.status = 'running' AND t.id = c.target_id
    RETURNING c.id, c.deployment_id, c.step_position, t.name, u.status, u.exit_code, u.output_tail,
              u.output_truncated, u.error, u.analysis_input
), event AS (
    INSERT INTO deployment_events (deployment_id, type, data)
    SELECT s.deployment_id, 'target.' || s.status,
           jsonb_build_object('step_position', s.step_position, 'target', s.name, 'command_id', s.id,
                              'exit_code', s.exit_code::int, 'output_tail', s.output_tail,
                              'output_truncated', s.output_truncated)
           || CASE WHEN s.error = '' THEN '{}'::jsonb ELSE jsonb_build_object('error', s.error) END
    FROM stored s
    WHERE s.deployment_id IS NOT NULL
), analysis AS (
    INSERT INTO analyses (command_id, source, input)
    SELECT s.id, 'internal', right(s.analysis_input, @max_analysis_input::int)
    FROM stored s
    WHERE s.status = 'failed'
    ON CONFLICT (command_id) DO NOTHING
)
SELECT id, deployment_id, step_position, name FROM stored;
