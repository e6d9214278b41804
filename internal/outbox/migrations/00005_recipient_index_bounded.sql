-- +goose Up
-- A btree entry must fit in about a third of a page (2,704 bytes). 00003's
-- notifications_recipient indexed every settled row's recipient, so one row
-- whose recipient was longer (a 3,200-character address accepted before
-- recipients were bounded) failed every statement that settled, cancelled or
-- dead-lettered it, retried forever, and held up the rows batched with it.
-- Recipients are now bounded at their entrances (outbox.MaxRecipientLen,
-- 1,024 bytes), but a row written before that, or by an application's own
-- SQL, must still be storable: the index leaves such rows out, and lookups
-- by recipient (which are bounded the same way) repeat the predicate so the
-- planner can use it.
--
-- On a large table, build the new index beforehand without blocking writes;
-- this migration then only drops the old one:
--   CREATE INDEX CONCURRENTLY notifications_recipient_bounded
--       ON notifications (recipient COLLATE "C", id)
--    WHERE status IN ('SENT', 'FAILED', 'CANCELLED') AND octet_length(recipient) <= 1024;
CREATE INDEX IF NOT EXISTS notifications_recipient_bounded ON notifications (recipient COLLATE "C", id)
    WHERE status IN ('SENT', 'FAILED', 'CANCELLED') AND octet_length(recipient) <= 1024;
DROP INDEX IF EXISTS notifications_recipient;

-- +goose Down
CREATE INDEX IF NOT EXISTS notifications_recipient ON notifications (recipient COLLATE "C", id)
    WHERE status IN ('SENT', 'FAILED', 'CANCELLED');
DROP INDEX IF EXISTS notifications_recipient_bounded;
