-- The statements that make a login role ($1) with a password ($2) that may create
-- databases and nothing more: not a superuser, no roles. The mantis role and the
-- temporal server's role are such logins. Identifiers and the password are quoted
-- server-side by format(); the stack executes each row it returns.
SELECT format('CREATE ROLE %I', $1::text)
 WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = $1::text)
UNION ALL
SELECT format('ALTER ROLE %I LOGIN NOSUPERUSER NOCREATEROLE NOREPLICATION NOBYPASSRLS CREATEDB PASSWORD %L', $1::text, $2::text);
