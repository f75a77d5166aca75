-- StoreCommandResults (schema/queries/result_batch.sql) as a function, so that its
-- statement keeps one plan per connection. Sent as a prepared statement, it was
-- planned again on every call for the arrays of that call: 0.2 ms of the server's CPU
-- for a lone result and 0.6 ms for a batch of 8 results of a deployment, more than a
-- bare UPDATE costs whole. The function's settings keep the plan it made first, and
-- make that plan read the batch by primary key whatever the table held when it was
-- made: no sequential scan, and a test of status no partial index of running commands
-- answers, so the plan cannot walk every running command
-- (TestStoreReadsItsBatchNotTheRunningCommands).
--
-- It records the results of running commands, given side by side in arrays (one
-- element per result), each at its lease epoch, with each one's target event and, for
-- a failure, its analysis request. The rows returned are the results stored; a result
-- without a row stored nothing (stale epoch, command not running). A started_at or
-- finished_at of 0001-01-01 00:00:00+00 (Go's zero time) is unknown. The update
-- returns what the event and the analysis request need from the input, so that neither
-- joins the input again: the planner, guessing one stored row, would scan the input
-- once per stored row.

-- command_result_rows is the row type of store_command_results: a stored command and
-- its target's name.
CREATE VIEW command_result_rows AS
    SELECT c.id, c.deployment_id, c.step_position, t.name
    FROM command_queue c JOIN targets t ON t.id = c.target_id;

CREATE FUNCTION store_command_results(
    p_command_ids uuid[], p_lease_epochs bigint[], p_statuses text[], p_exit_codes bigint[],
    p_outputs text[], p_outputs_truncated boolean[], p_errors text[], p_started_at timestamptz[],
    p_finished_at timestamptz[], p_outputs_raw bytea[], p_instance_ids uuid[], p_output_tails text[],
    p_analysis_inputs text[], p_max_analysis_input integer)
    RETURNS SETOF command_result_rows
    LANGUAGE plpgsql
    SET plan_cache_mode = force_generic_plan
    SET enable_seqscan = off
AS $$
BEGIN
    RETURN QUERY
    WITH input AS (
        SELECT unnest(p_command_ids) AS command_id, unnest(p_lease_epochs) AS lease_epoch,
               unnest(p_statuses) AS status, unnest(p_exit_codes) AS exit_code,
               unnest(p_outputs) AS output, unnest(p_outputs_truncated) AS output_truncated,
               unnest(p_errors) AS error, unnest(p_started_at) AS started_at,
               unnest(p_finished_at) AS finished_at, unnest(p_outputs_raw) AS output_raw,
               unnest(p_instance_ids) AS instance_id, unnest(p_output_tails) AS output_tail,
               unnest(p_analysis_inputs) AS analysis_input
    ), stored AS (
        UPDATE command_queue c
        SET status = u.status, exit_code = u.exit_code::int, output = u.output,
            output_truncated = u.output_truncated, error = NULLIF(u.error, ''),
            started_at = NULLIF(u.started_at, '0001-01-01 00:00:00+00'::timestamptz),
            finished_at = NULLIF(u.finished_at, '0001-01-01 00:00:00+00'::timestamptz),
            output_raw = u.output_raw, result_instance_id = u.instance_id
        FROM input u, targets t
        WHERE c.id = ANY(p_command_ids) AND c.id = u.command_id AND c.lease_epoch = u.lease_epoch
          AND (c.status = 'running') IS TRUE AND t.id = c.target_id
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
        SELECT s.id, 'internal', right(s.analysis_input, p_max_analysis_input)
        FROM stored s
        WHERE s.status = 'failed'
        ON CONFLICT (command_id) DO NOTHING
    )
    SELECT s.id, s.deployment_id, s.step_position, s.name FROM stored s;
END;
$$;
