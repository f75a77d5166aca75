-- Result fencing: why a result or a redispatch was refused (schema/result_fencing.go).

-- name: CommandLease :one
-- CommandLease reads a command's lease epoch, status, whether a result was stored,
-- the instance holding it, its target's name and its mode.
SELECT c.lease_epoch, c.status, (c.result_instance_id IS NOT NULL)::bool AS reported,
       c.holder_instance_id, t.name AS target, c.mode
FROM command_queue c JOIN targets t ON t.id = c.target_id
WHERE c.id = @id::uuid;

-- name: CommandDelivery :one
-- CommandDelivery reads a command's status and delivery next to its request's.
SELECT c.status, c.dispatch_attempt, p.attempts, p.status AS request_status, p.id AS request_id
FROM command_queue c JOIN pending_dispatch_requests p ON p.id = c.dispatch_request_id
WHERE c.id = @id::uuid;
