-- A result is fenced by its lease epoch, not by the instance that claimed the command:
-- while the epoch is current, any Thorax instance may forward it (the one that handed
-- the command out restarted, registered again under a new id, or the agent reached
-- another instance). result_instance_id records the instance that delivered the
-- result; holder_instance_id still names the one that claimed it.
ALTER TABLE command_queue ADD COLUMN result_instance_id uuid;

COMMENT ON COLUMN command_queue.lease_epoch IS
    'Fencing token of results and redispatches: every claim moves it on; a result is recorded only at the current epoch of a running command.';

-- The budget in the seed's words: "Failed dispatches are retried up to 10 times".
COMMENT ON COLUMN pending_dispatch_requests.attempts IS
    'Failed deliveries so far. A request gets a first delivery and up to 10 retries (schema.MaxDispatchRetries): the 11th failed delivery fails it. A command handed back unrun costs nothing.';
