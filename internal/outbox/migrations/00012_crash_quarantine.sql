-- +goose Up
-- Crash-loop quarantine (docs/design.md §10): how many times in a row a
-- notification was in flight when the process claiming it died (its claim
-- was taken over once stale). The claim that takes a row over counts it and
-- sends that row alone; any verdict settled for it, and a replay, reset it.
-- A constant default is a catalog change only: no rewrite under the lock.
ALTER TABLE notifications ADD COLUMN crashes smallint NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE notifications DROP COLUMN crashes;
