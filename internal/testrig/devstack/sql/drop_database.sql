-- The statement that drops a database ($1), whoever is connected to it, quoted
-- server-side by format(); the stack executes the row it returns.
SELECT format('DROP DATABASE IF EXISTS %I WITH (FORCE)', $1::text);
