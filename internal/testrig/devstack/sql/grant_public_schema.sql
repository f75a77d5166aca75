-- The statement that lets a role ($1) create tables in the public schema of the
-- database it runs in, quoted server-side by format(); the stack executes the row it
-- returns.
SELECT format('GRANT CREATE ON SCHEMA public TO %I', $1::text);
