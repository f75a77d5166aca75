-- Output is bytes. A command may print anything: NUL, bytes that are not UTF-8, escape
-- sequences. PostgreSQL's text and jsonb refuse NUL (and text refuses invalid UTF-8), so
-- storing such output as text failed the whole result and left the command running.
--
-- output_raw keeps what the command printed, unaltered, as bytes: the tail of it, as
-- the agent cut it (exec.output_limit_bytes) and Mandible bounds it (1 MiB, the same
-- bound as this constraint). output keeps the display text of its end (valid UTF-8,
-- NUL shown as U+2400, invalid bytes as U+FFFD; see internal/safetext), which events,
-- views, the API and analyses read.
ALTER TABLE command_queue
    ADD COLUMN output_raw bytea
        CONSTRAINT command_queue_output_raw_bound CHECK (octet_length(output_raw) <= 1048576);

COMMENT ON COLUMN command_queue.output_raw IS
    'the bytes the command printed (its tail, at most 1 MiB), unaltered';
COMMENT ON COLUMN command_queue.output IS
    'display text of the end of output_raw: valid UTF-8 without NUL';

-- Rows stored before were valid text already: their bytes are their UTF-8 encoding,
-- of which the last 1 MiB is kept.
UPDATE command_queue c
SET output_raw = substring(r.b FROM greatest(octet_length(r.b) - 1048575, 1))
FROM (SELECT id, convert_to(output, 'UTF8') AS b FROM command_queue WHERE output IS NOT NULL) r
WHERE c.id = r.id;
