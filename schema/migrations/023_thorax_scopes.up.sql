-- Which targets a Thorax certificate may serve: the blast radius of a Thorax key.
-- Mandible's thorax.scopes names, per certificate, target name patterns and label
-- selectors; an instance carries its certificate's scope from its registration, so
-- that every statement that gives a target to an instance (a listen target's
-- assignment and reassignment, a poll target named in a heartbeat or a fetch) can
-- test it where it picks. NULL is no restriction, as for every instance registered
-- before this migration and every certificate the configuration does not scope.
ALTER TABLE thorax_instances ADD COLUMN scope_patterns text[];
ALTER TABLE thorax_instances ADD COLUMN scope_labels jsonb CHECK (jsonb_typeof(scope_labels) = 'array');

-- thorax_may_serve says whether an instance whose scope is (patterns, label_sets) may
-- serve the target called name with labels: no scope, a LIKE pattern matching its
-- name, or a label set its labels (those an admin set) hold.
CREATE FUNCTION thorax_may_serve(patterns text[], label_sets jsonb, name text, labels jsonb)
    RETURNS boolean
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT patterns IS NULL
        OR name LIKE ANY (patterns)
        OR EXISTS (SELECT 1 FROM jsonb_array_elements(coalesce(label_sets, '[]'::jsonb)) s
                   WHERE coalesce(labels, '{}'::jsonb) @> s.value)
$$;
