-- A command ending wakes the dispatchers when requests wait (015). The look at the
-- queue now runs once per transaction instead of once per ended command, so a batch
-- of results stored in one statement pays for it once: the first command a
-- transaction ends looks and, if requests wait, notifies (PostgreSQL delivers one
-- notification per channel and payload at commit however many are sent); the
-- transaction's later commands skip the look. A request inserted later in the same
-- transaction notifies by itself (pending_dispatch_requests_notify).
CREATE OR REPLACE FUNCTION notify_limit_room() RETURNS trigger
    LANGUAGE plpgsql AS $$
BEGIN
    IF current_setting('mantis.limit_room_looked', true) IS DISTINCT FROM 'on' THEN
        PERFORM set_config('mantis.limit_room_looked', 'on', true);
        IF EXISTS (SELECT 1 FROM pending_dispatch_requests WHERE status = 'pending' LIMIT 1) THEN
            PERFORM pg_notify('mantis_dispatch_requests', '');
        END IF;
    END IF;
    RETURN NULL;
END;
$$;
