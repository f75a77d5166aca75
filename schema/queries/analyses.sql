-- Analyses of failed commands and of external requests (schema/analyses.go).

-- name: AnalysisOf :one
-- AnalysisOf reads the analysis of the external request external_id or of the
-- command command_id: the one of the two that is not NULL.
SELECT id, command_id, coalesce(external_id, '')::text AS external_id, source, status,
       coalesce(category, '')::text AS category, coalesce(summary, '')::text AS summary,
       coalesce(suggestion, '')::text AS suggestion, coalesce(refined_by, '')::text AS refined_by,
       coalesce(error, '')::text AS error, created_at, finished_at
FROM analyses
WHERE external_id = sqlc.narg(external_id)::text OR command_id = sqlc.narg(command_id)::uuid;

-- name: InsertExternalAnalysis :execrows
-- InsertExternalAnalysis stores an external request, queued, keeping the last
-- max_input characters of its input; none when its request_id is stored already.
INSERT INTO analyses (external_id, source, input, category, summary, suggestion)
VALUES (@external_id::text, 'external', right(@input::text, @max_input::int), sqlc.narg(category), sqlc.narg(summary), sqlc.narg(suggestion))
ON CONFLICT (external_id) DO NOTHING;

-- name: LockQueuedAnalyses :many
-- LockQueuedAnalyses locks up to max_rows queued analyses, oldest first, skipping
-- those another transaction holds, with the command, target and step they explain.
SELECT a.id, a.source, a.input, a.command_id, coalesce(a.external_id, '')::text AS external_id,
       coalesce(a.category, '')::text AS category, coalesce(a.summary, '')::text AS summary,
       coalesce(a.suggestion, '')::text AS suggestion,
       c.exit_code, coalesce(c.error, '')::text AS command_error, coalesce(t.name, '')::text AS target,
       c.deployment_id, c.step_position
FROM analyses a
LEFT JOIN command_queue c ON c.id = a.command_id
LEFT JOIN targets t ON t.id = c.target_id
WHERE a.status = 'queued'
ORDER BY a.created_at
LIMIT @max_rows
FOR UPDATE OF a SKIP LOCKED;

-- name: FinishAnalysis :execrows
-- FinishAnalysis records a queued analysis's outcome; none when it is no longer queued.
UPDATE analyses
SET status = 'done', category = @category::text, summary = @summary::text, suggestion = @suggestion::text,
    refined_by = sqlc.narg(refined_by), error = sqlc.narg(error), finished_at = now()
WHERE id = @id AND status = 'queued';

-- name: FailAnalysis :exec
-- FailAnalysis marks a queued analysis failed with the reason.
UPDATE analyses SET status = 'failed', error = @reason::text, finished_at = now()
WHERE id = @id AND status = 'queued';
