-- Thorax instances as operators inspect them (schema/instances_view.go).

-- name: ListThoraxInstances :many
-- ListThoraxInstances lists the instances newest first, each with whether it counts as
-- live (status live and a heartbeat within heartbeat_timeout_seconds) and how many
-- registered targets it is assigned.
SELECT i.id, i.name, coalesce(i.cert_name, '')::text AS cert_name, (i.scope_patterns IS NOT NULL)::bool AS scoped,
       i.status, i.version, i.registered_at, i.last_heartbeat_at, i.died_at,
       (i.status = 'live' AND i.last_heartbeat_at > now() - make_interval(secs => @heartbeat_timeout_seconds::float8))::bool AS live,
       (SELECT count(*) FROM targets t WHERE t.assigned_instance_id = i.id AND t.deregistered_at IS NULL)::int AS targets
FROM thorax_instances i
ORDER BY i.registered_at DESC
LIMIT @max_rows::int;
