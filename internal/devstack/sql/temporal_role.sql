-- The statements that make the temporal server's role: a login with a password that
-- may create its two databases and nothing more. Identifiers and the password are
-- quoted server-side by format(); the stack executes each row it returns.
SELECT format('CREATE ROLE %I', $1::text)
 WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = $1::text)
UNION ALL
SELECT format('ALTER ROLE %I LOGIN NOSUPERUSER NOCREATEROLE NOREPLICATION NOBYPASSRLS CREATEDB PASSWORD %L', $1::text, $2::text);
