-- Batched results (schema/result_batch.go): many results stored by one statement, in
-- one transaction, each fenced by its own lease epoch and its caller as
-- StoreCommandResult fences one.

-- name: StoreCommandResults :many
-- StoreCommandResults records the results of running commands, given side by side in
-- arrays (one element per result), each at its lease epoch, with each one's target
-- event and, for a failure, its analysis request; the statement is the function
-- store_command_results (migrations 021 and 022), which keeps one plan per connection.
-- A result is stored only from the instance holding the command, or when the target
-- it names (targets, an empty string for none) is the command's own. The rows returned are the
-- results stored; a result without a row stored nothing (stale epoch, command not
-- running, a caller that neither holds it nor names its target). A started_at or finished_at of 0001-01-01 00:00:00+00
-- (Go's zero time) is unknown.
SELECT *
FROM store_command_results(
    @command_ids::uuid[], @lease_epochs::bigint[], @statuses::text[], @exit_codes::bigint[],
    @outputs::text[], @outputs_truncated::bool[], @errors::text[], @started_at::timestamptz[],
    @finished_at::timestamptz[], @outputs_raw::bytea[], @instance_ids::uuid[], @output_tails::text[],
    @analysis_inputs::text[], @max_analysis_input::int, @targets::text[]);
