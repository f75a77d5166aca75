-- Concurrency limits that hold across deployments and Mandible replicas
-- (schema/limits.go, schema/claim_limits.go).
--
-- A limit caps how many commands run at once on one target (scope target: on the
-- target named by value, or, with no value, the default of every target) or on all
-- the targets carrying label=value (scope label). A request a limit holds back stays
-- pending: it spends no attempt, is claimed as soon as the limit allows, and still
-- expires 24 h after creation.
CREATE TABLE concurrency_limits (
    name        text        PRIMARY KEY CHECK (name ~ '^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$'),
    scope       text        NOT NULL CHECK (scope IN ('target', 'label')),
    label       text        CHECK (label <> ''),
    value       text        CHECK (value <> ''),
    max_running integer     NOT NULL CHECK (max_running BETWEEN 1 AND 100000),
    created_by  text        NOT NULL DEFAULT '',
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT concurrency_limits_shape CHECK (
        (scope = 'target' AND label IS NULL) OR (scope = 'label' AND label IS NOT NULL AND value IS NOT NULL))
);

-- One limit per thing limited, so that a held request names the one limit holding it.
CREATE UNIQUE INDEX concurrency_limits_subject
    ON concurrency_limits (scope, coalesce(label, ''), coalesce(value, ''));

-- The default of every target: one command at a time, across all deployments. It may
-- be changed (POST the same name) but not deleted.
INSERT INTO concurrency_limits (name, scope, max_running, created_by)
VALUES ('target-default', 'target', 1, 'migration');

-- What runs on a target: its requests claimed and not yet delivered (processing) and
-- its commands queued or running (a command hands its request over in the delivery's
-- transaction, so nothing is counted twice or missed between the two).
CREATE INDEX pending_dispatch_requests_processing_target
    ON pending_dispatch_requests (target_id) WHERE status = 'processing';
CREATE INDEX command_queue_active_target
    ON command_queue (target_id) WHERE status IN ('queued', 'running');

-- target_running counts what runs on a target, up to cap: the claim only needs to
-- know whether a limit is reached, so the count stops there.
CREATE FUNCTION target_running(target uuid, cap integer) RETURNS integer
    LANGUAGE sql STABLE AS $$
    SELECT ((SELECT count(*) FROM (SELECT 1 FROM pending_dispatch_requests
                                   WHERE target_id = target AND status = 'processing' LIMIT cap) a)
          + (SELECT count(*) FROM (SELECT 1 FROM command_queue
                                   WHERE target_id = target AND status IN ('queued', 'running') LIMIT cap) c))::integer
$$;

-- label_running counts what runs on the targets carrying label = value, up to cap.
CREATE FUNCTION label_running(label text, value text, cap integer) RETURNS integer
    LANGUAGE sql STABLE AS $$
    SELECT ((SELECT count(*) FROM (SELECT 1 FROM pending_dispatch_requests p JOIN targets t ON t.id = p.target_id
                                   WHERE p.status = 'processing' AND t.labels ->> label = value LIMIT cap) a)
          + (SELECT count(*) FROM (SELECT 1 FROM command_queue c JOIN targets t ON t.id = c.target_id
                                   WHERE c.status IN ('queued', 'running') AND t.labels ->> label = value LIMIT cap) c))::integer
$$;

-- A command ending frees room under a limit: when requests wait for it, the replicas
-- are woken on the channel new requests use, so a held request is claimed at once
-- rather than at the next tick.
CREATE FUNCTION notify_limit_room() RETURNS trigger
    LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM pending_dispatch_requests WHERE status = 'pending' LIMIT 1) THEN
        PERFORM pg_notify('mantis_dispatch_requests', '');
    END IF;
    RETURN NULL;
END;
$$;

CREATE TRIGGER command_queue_limit_room
    AFTER UPDATE OF status ON command_queue
    FOR EACH ROW
    WHEN (NEW.status IN ('succeeded', 'failed', 'cancelled', 'lost') AND OLD.status IS DISTINCT FROM NEW.status)
    EXECUTE FUNCTION notify_limit_room();
