-- A result is stored only from who may know it. store_command_results of migration 021
-- fenced a result by its lease epoch alone, so any Thorax certificate, registering an
-- instance of its own, could store the result of a command another Thorax held, and an
-- agent could make another target's command succeed through a forward. This overload
-- takes, per result, the target the forwarding Thorax names (the name on the reporting
-- agent's certificate, or '' when it names none), and stores a result only when the
-- caller's instance holds the command or, for a poll-mode command (only those reach
-- Mandible through an instance that does not hold them), the named target is the
-- command's own target. Both tests are in the statement that fences the epoch, so nothing stored can
-- pass one and miss the other. The 14-argument function stays for the replicas of the
-- previous release during a rolling upgrade.

CREATE FUNCTION store_command_results(
    p_command_ids uuid[], p_lease_epochs bigint[], p_statuses text[], p_exit_codes bigint[],
    p_outputs text[], p_outputs_truncated boolean[], p_errors text[], p_started_at timestamptz[],
    p_finished_at timestamptz[], p_outputs_raw bytea[], p_instance_ids uuid[], p_output_tails text[],
    p_analysis_inputs text[], p_max_analysis_input integer, p_targets text[])
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
               unnest(p_analysis_inputs) AS analysis_input, unnest(p_targets) AS target
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
          AND (c.holder_instance_id = u.instance_id OR (u.target <> '' AND t.name = u.target AND c.mode = 'poll'))
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
