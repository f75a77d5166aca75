-- Whether a database of this name exists.
SELECT EXISTS (SELECT FROM pg_database WHERE datname = $1::text);
