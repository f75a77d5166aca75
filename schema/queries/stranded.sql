-- Stranded deployments: rows the API stored whose workflow never started
-- (schema/stranded.go).

-- name: PendingDeploymentsCreatedBefore :many
-- PendingDeploymentsCreatedBefore lists deployments still pending that were created
-- more than age ago, oldest first.
SELECT id FROM deployments
WHERE status = 'pending' AND created_at < now() - @age::interval
ORDER BY created_at
LIMIT @max_rows::int;
