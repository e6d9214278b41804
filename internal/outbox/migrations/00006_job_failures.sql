-- +goose Up
-- failed: audience members whose notification could not be made (a payload
-- template error, a rendered payload or recipient over its bound). Each is a
-- FAILED notification with the reason; the run goes on (internal/schedule).
--
-- takeovers and takeover_cursor: a RUNNING job whose owner went stale is taken
-- over; one whose owners keep dying at the same cursor (a job that crashes
-- the process) is failed after jobs.max_takeovers instead of being taken
-- over again. The count restarts when the cursor has moved since.
ALTER TABLE jobs
    ADD COLUMN failed          bigint  NOT NULL DEFAULT 0,
    ADD COLUMN takeovers       integer NOT NULL DEFAULT 0,
    ADD COLUMN takeover_cursor text;

-- +goose Down
ALTER TABLE jobs DROP COLUMN failed, DROP COLUMN takeovers, DROP COLUMN takeover_cursor;
