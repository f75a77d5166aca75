-- Deployments wait on their commands' results: terminal states notify, and a cancelled
-- deployment's requests end 'cancelled'.

ALTER TABLE pending_dispatch_requests DROP CONSTRAINT pending_dispatch_requests_status_check;
ALTER TABLE pending_dispatch_requests ADD CONSTRAINT pending_dispatch_requests_status_check
    CHECK (status IN ('pending', 'processing', 'dispatched', 'failed', 'expired', 'cancelled'));

-- A deployment's command or request reaching a terminal state wakes whoever waits on
-- that deployment (LISTEN mantis_deployment_results; the payload is the deployment id).
CREATE FUNCTION notify_deployment_result() RETURNS trigger
    LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.deployment_id IS NOT NULL THEN
        PERFORM pg_notify('mantis_deployment_results', NEW.deployment_id::text);
    END IF;
    RETURN NULL;
END;
$$;

CREATE TRIGGER command_queue_result_notify
    AFTER UPDATE OF status ON command_queue
    FOR EACH ROW
    WHEN (NEW.status IN ('succeeded', 'failed', 'cancelled', 'lost') AND OLD.status IS DISTINCT FROM NEW.status)
    EXECUTE FUNCTION notify_deployment_result();

CREATE TRIGGER pending_dispatch_requests_result_notify
    AFTER UPDATE OF status ON pending_dispatch_requests
    FOR EACH ROW
    WHEN (NEW.status IN ('failed', 'expired', 'cancelled') AND OLD.status IS DISTINCT FROM NEW.status)
    EXECUTE FUNCTION notify_deployment_result();

-- The deployment view lists a step's targets with their latest command.
CREATE INDEX pending_dispatch_requests_deployment_step_target
    ON pending_dispatch_requests (deployment_id, step_position, target_id)
    WHERE deployment_id IS NOT NULL;
