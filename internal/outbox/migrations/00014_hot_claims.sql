-- +goose Up
-- Claims without new index entries (docs/design.md §2, "Where a row's state
-- is indexed"; issue 29). A row version that changes no column an index
-- names — as a key, an expression or in its predicate — is a HOT update:
-- one new version on the same page, no entry in any index. Until now every
-- partial index named status in its predicate, so every transition added an
-- entry to the primary key, the idempotency index and the partial index the
-- new version matched: 35% of Postgres' CPU in the 08:00 burst was btree
-- inserts (docs/performance.md).
--
-- The partial indexes now name phase instead, a stored generated column that
-- groups the states the way the indexes read them:
--   0  PENDING               the relay's due rows      (notifications_pending_due)
--   1  QUEUED, PROCESSING    in flight                 (notifications_inflight_id)
--   2  SENT, CANCELLED       done                      (notifications_recipient_bounded)
--   3  FAILED                the dead-letter queue     (notifications_failed_*,
--                                                      notifications_recipient_bounded)
-- Postgres computes it on every insert and update, so no statement (nor an
-- application's own INSERT) sets it, and it cannot disagree with status.
-- The claim (QUEUED -> PROCESSING), a retry (PROCESSING -> QUEUED) and the
-- sweeper's and takeover's changes keep phase 1, and change no other indexed
-- column (status, attempts, updated_at, next_attempt_at, crashes are in no
-- index): HOT when the page has room. The relay (0 -> 1) and the final
-- settle (1 -> 2 or 3) still add index entries, as they must move a row
-- between partial indexes. Queries that read a partial index repeat its
-- phase predicate (the planner cannot infer phase from status).
--
-- fillfactor 50: HOT needs room on the row's own page. Inserts now fill a
-- page half; the relay's version fits beside the inserted one, the claim's
-- after the page is pruned of it, the settle's after the claim's is. Measured
-- (50,000 rows, one burst): 4,900 pages at the end against 7,600-7,900
-- before (each non-HOT version had gone to another page), 39,000-46,000 of
-- about 135,000 updates HOT (at fillfactor 80: 21,000; at 100: 3,000).
-- The cost is history: a settled row stays on the page it was inserted on,
-- so finished rows take up to twice the pages they would packed full.
--
-- On a large table this rewrites it (the generated column) and rebuilds five
-- indexes under an exclusive lock, during which nothing is enqueued or sent:
-- 12 s for 2,000,000 settled rows on the 2-core machine of
-- docs/performance.md (579 MB, the same size after), 44 s for 10,000,000
-- (1,595 MB; its indexes 1,278 MB before and 908 MB after, rebuilt packed).
-- Run `notifyd migrate` at a quiet hour before starting the new version on
-- a large outbox.
ALTER TABLE notifications ADD COLUMN phase smallint NOT NULL GENERATED ALWAYS AS (
    CASE status WHEN 'PENDING' THEN 0
                WHEN 'QUEUED' THEN 1 WHEN 'PROCESSING' THEN 1
                WHEN 'FAILED' THEN 3
                ELSE 2 END) STORED;
-- After the rewrite above, so the rows already there stay packed as they were;
-- only pages written from now on keep half their room.
ALTER TABLE notifications SET (fillfactor = 50);

DROP INDEX notifications_pending_due;
CREATE INDEX notifications_pending_due ON notifications (due_at, id) WHERE phase = 0;
DROP INDEX notifications_inflight_id;
CREATE INDEX notifications_inflight_id ON notifications (id) WHERE phase = 1;
DROP INDEX notifications_failed_channel;
CREATE INDEX notifications_failed_channel ON notifications (channel, id) WHERE phase = 3;
DROP INDEX notifications_failed_id;
CREATE INDEX notifications_failed_id ON notifications (id) WHERE phase = 3;
DROP INDEX notifications_recipient_bounded;
CREATE INDEX notifications_recipient_bounded ON notifications (recipient COLLATE "C", id)
    WHERE phase >= 2 AND octet_length(recipient) <= 1024;

-- +goose Down
DROP INDEX notifications_pending_due;
CREATE INDEX notifications_pending_due ON notifications (due_at, id) WHERE status = 'PENDING';
DROP INDEX notifications_inflight_id;
CREATE INDEX notifications_inflight_id ON notifications (id) WHERE status IN ('QUEUED', 'PROCESSING');
DROP INDEX notifications_failed_channel;
CREATE INDEX notifications_failed_channel ON notifications (channel, id) WHERE status = 'FAILED';
DROP INDEX notifications_failed_id;
CREATE INDEX notifications_failed_id ON notifications (id) WHERE status = 'FAILED';
DROP INDEX notifications_recipient_bounded;
CREATE INDEX notifications_recipient_bounded ON notifications (recipient COLLATE "C", id)
    WHERE status IN ('SENT', 'FAILED', 'CANCELLED') AND octet_length(recipient) <= 1024;
ALTER TABLE notifications DROP COLUMN phase;
ALTER TABLE notifications RESET (fillfactor);
