-- +goose Up
-- Lookup by recipient ("why did user X not get it"), the dashboard's Lookup
-- page and Store.ListByRecipient:
--   SELECT … FROM notifications
--    WHERE recipient COLLATE "C" = $1 AND id < $before ORDER BY id DESC LIMIT n
-- (keyset paging, newest first). The index is on the C collation, like
-- channel and idempotency_key: inserts compare bytes instead of running
-- strcoll, and for equality the result is the same; the query names the
-- collation so that the planner can use it.
--
-- A full index, not a partial one: history is wanted in every state. Like
-- every index here it gains an entry per row version (transitions are not
-- HOT), the price of the lookup; see core/ui/README.md for the measurement.
--
-- On a large existing table, build it beforehand without blocking writes and
-- this migration then does nothing:
--   CREATE INDEX CONCURRENTLY notifications_recipient
--       ON notifications (recipient COLLATE "C", id);
CREATE INDEX IF NOT EXISTS notifications_recipient ON notifications (recipient COLLATE "C", id);

-- +goose Down
DROP INDEX notifications_recipient;
