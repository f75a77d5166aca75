-- The newest live Thorax instance of a name registered since a time: dev up waits
-- for the Thorax it started to register with Mandible.
SELECT id FROM thorax_instances
WHERE name = $1 AND status = 'live' AND registered_at >= $2
ORDER BY registered_at DESC LIMIT 1;
