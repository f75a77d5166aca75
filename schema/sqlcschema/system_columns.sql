-- What sqlc reads beside the migrations, never applied to a database: PostgreSQL's
-- system column ctid (a row version's address), which sqlc's catalog does not know.
-- A query that locks rows and then updates them in the same transaction may find
-- them again by address, since the lock keeps each where it is.
ALTER TABLE pending_dispatch_requests ADD COLUMN ctid tid;
