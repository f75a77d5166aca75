-- The statement that creates a database ($1) owned by a role ($2), quoted
-- server-side by format(); the stack executes the row it returns.
SELECT format('CREATE DATABASE %I OWNER %I', $1::text, $2::text);
