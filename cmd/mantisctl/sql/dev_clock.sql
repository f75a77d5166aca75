-- The database's clock: instances registered after it are this run's.
SELECT now();
