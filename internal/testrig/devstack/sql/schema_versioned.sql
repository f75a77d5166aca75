-- Whether temporal-sql-tool's setup-schema has run in this database.
SELECT to_regclass('public.schema_version') IS NOT NULL;
