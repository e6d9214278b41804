-- +goose Up
-- Delivery receipts (docs/design.md §7, Receipts): what a provider reported
-- of a SENT notification afterwards, through a callback its plugin read —
-- DELIVERED, or FAILED_AFTER_SEND. One receipt per notification: the first
-- report wins, and the primary key is what makes a callback the provider
-- repeats change nothing (INSERT ... ON CONFLICT DO NOTHING).
--
-- A table of its own, not a column of notifications nor a row of
-- notification_attempts: recording a receipt touches no notifications row
-- (no new row version, no index entry, no count delta on the outbox the
-- pipeline works on; the send and settle statements are unchanged), and
-- attempts keep counting attempts (a notification's attempts and its history
-- agree, §2). No foreign key, as for notification_attempts: retention deletes
-- a notification's receipt with it.
CREATE TABLE notification_receipts (
    notification_id bigint      PRIMARY KEY,
    outcome         text        NOT NULL CHECK (outcome IN ('DELIVERED', 'FAILED_AFTER_SEND')),
    -- The notification's attempts when the receipt came: the attempt the
    -- provider reports on.
    attempt         integer     NOT NULL,
    -- When the provider says it happened (NULL: it did not say), and when
    -- notifyd heard of it.
    reported_at     timestamptz,
    received_at     timestamptz NOT NULL DEFAULT now(),
    provider_code   text,
    detail          text
);

-- +goose Down
DROP TABLE notification_receipts;
