-- The statements that turn a migrated database ($1) into the test template ($2): no
-- session may connect to it any more (CREATE DATABASE ... TEMPLATE refuses a template
-- anyone is connected to), then it takes its final name. Quoted server-side by
-- format(); the stack executes each row it returns, in order.
SELECT stmt FROM (VALUES
    (1, format('ALTER DATABASE %I WITH ALLOW_CONNECTIONS false', $1::text)),
    (2, format('ALTER DATABASE %I RENAME TO %I', $1::text, $2::text))
) AS s (step, stmt)
ORDER BY step;
